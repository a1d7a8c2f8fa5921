"""Run one all-reduce on a built network and measure it.

:func:`run_switchml` starts one worker emulator (:mod:`p4gen.testbed.agent`)
per host (SwitchML, or OmniReduce with its sparse protocol: block-sparse
tensors of the given ``density`` and a check with one exponent per stream), releases them together, optionally injects a fault, and checks
every worker's result against the exact sum.  :func:`run_gloo` does the
same with ``torch.distributed`` (Gloo backend, ring all-reduce) on the same
hosts and links.  Both return a :class:`RunResult`, with the run's time
against its link-rate bound (:mod:`p4gen.testbed.bounds`); a job that cannot
finish raises :class:`~p4gen.testbed.errors.JobError` with one line that
says which worker failed and why.
"""

from __future__ import annotations

import json
import queue
import sys
import threading
import time
from dataclasses import asdict, dataclass, field

import numpy as np

from p4gen import protocols
from p4gen.wire import FrameLayout
from p4gen.filewrite import WORK, write_file

from . import bounds, procs, tensors
from .errors import JobError, TestbedError
from .net import Network
from .topo import SWITCH_IP, SWITCH_MAC

FAULTS = ("kill-worker", "restart-switch")
GATHER_FRACTION = 0.5     # of the window's time on the link that a worker waits once a burst begins
GATHER_MAX = 0.040         # seconds
WINDOW_MIN, WINDOW_MAX = 64, 256


@dataclass
class RunResult:
    protocol: str
    workers: int
    size: int                 # elements
    dtype: str
    density: float
    mbit: float
    loss: float
    topo: str
    switch: str
    time: float               # seconds, slowest worker
    goodput_mbit: float       # tensor bits / time
    bound_time: float         # link-rate bound of this protocol, headers included (p4gen.testbed.bounds)
    pct_of_bound: float       # bound_time / time * 100
    packets: int              # frames the workers sent (SwitchML: protocol frames; Gloo: interface frames)
    retransmissions: int
    bytes_per_worker: float   # bytes each worker sent on its link (mean)
    max_abs_error: float
    error_bound: float
    exact: bool
    correct: bool
    fault: str | None = None
    fault_outcome: str | None = None
    per_worker: list = field(default_factory=list)
    frames_on_links: int = 0  # frames the hosts' interfaces sent (all traffic)
    union_density: float = 1.0  # OmniReduce: fraction of blocks that some worker holds (rounds with data)
    loss_seen: float | None = None  # 1 - frames received / frames sent, over both directions of the host links
    loss_method: str | None = None  # netem, nft or iptables (see p4gen.testbed.loss)
    bound_how: str = ""       # what the link-rate bound counts, one line
    window: int = 0           # slots in flight per worker (SwitchML, OmniReduce)
    switch_cpu: float | None = None   # CPU seconds of the switch process from the workers' go to the last done
    workers_cpu: float | None = None  # CPU seconds of all worker processes in that time (each from go to done)
    cpu_per_mib: float | None = None  # (switch_cpu + workers_cpu) / MiB aggregated (workers x tensor bytes)
    p4_frames: int = 0        # frames the switch node's front ports steered to the P4 process during the run
    l2_frames: int = 0        # frames they left to the kernel bridge (ordinary traffic) during the run
    path: str = ""            # which path the run's frames took, one line, from those counters

    def to_dict(self) -> dict:
        return asdict(self)


class _Agents:
    """The worker processes of one run and the events they print."""

    def __init__(self, net: Network):
        self.net = net
        self.procs = {}
        self.events: queue.Queue = queue.Queue()

    def start(self, rank: int, host: str, argv: list[str], env: dict | None = None) -> None:
        p = self.net.spawn(host, argv, f"{argv[2].rsplit('.', 1)[-1]}-{host}.log", env=env, pipes=True)
        self.procs[rank] = p

        def read() -> None:
            for line in p.popen.stdout:
                try:
                    ev = json.loads(line)
                except ValueError:
                    continue
                self.events.put((rank, ev))
            p.popen.wait()
            self.events.put((rank, {"event": "exit", "rc": p.popen.returncode}))

        threading.Thread(target=read, daemon=True).start()

    def wait_all(self, kind: str, timeout: float, what: str) -> dict[int, dict]:
        got: dict[int, dict] = {}
        deadline = time.monotonic() + timeout
        while len(got) < len(self.procs):
            try:
                rank, ev = self.events.get(timeout=max(0.01, deadline - time.monotonic()))
            except queue.Empty:
                missing = sorted(set(self.procs) - set(got))
                p = self.procs[missing[0]]
                raise JobError(f"worker {missing[0]} ({p.name}) was not {what} in {timeout:.0f} s; see {p.log}") from None
            if ev["event"] == kind:
                got[rank] = ev
            elif kind == "done" and rank in got and ev["event"] == "exit" and ev.get("rc") == 0:
                continue           # a worker that is done ends normally while the others still run
            elif ev["event"] in ("error", "exit"):
                p = self.procs[rank]
                msg = ev.get("message") or f"exited with status {ev.get('rc')} ({p.tail(1)})"
                raise JobError(f"worker {rank} ({p.name}) failed before it was {what}: {msg}; see {p.log}")
        return got

    def go(self) -> None:
        for p in self.procs.values():
            p.popen.stdin.write("go\n")
            p.popen.stdin.flush()


def window_and_timeout(mbit: float, frame_bytes: int, window: int | None, switch=None, n: int = 1,
            chunks: int = 0, per: int = 16, most: int | None = None) -> tuple[int, float]:
    """(window, initial retransmission timeout) for a link of ``mbit`` and a tensor of ``chunks`` chunks,
    unless asked: one slot per ``per`` chunks, from 64 to 256 slots of 1 KiB frames (of larger frames as
    many bytes: 8 to 32 of 8 KiB), and at most ``most`` slots; SwitchML's float protocol sends one window
    more than the chunks, for the exponents, so that costs at most 6% more frames; a larger window lets
    the workers and the switch handle results in larger, rarer bursts, see :func:`gather_time`), or fewer
    when the ``n`` workers' windows together would exceed what ``switch`` takes in flight
    (``max_in_flight``); the timeout covers a full window queued on the link three times over, so a
    window in flight is not retransmitted spuriously."""
    k = max(1, frame_bytes // 1024)          # the limits hold for 1 KiB frames: in bytes for larger ones
    w = window or min(WINDOW_MAX // k, max(WINDOW_MIN // k, chunks // per), most or WINDOW_MAX)
    cap = getattr(switch, "max_in_flight", None)
    if window is None and cap:
        w = max(1, min(w, cap // n))
    serial = w * frame_bytes * 8 / (mbit * 1e6)
    return w, max(0.1, 3 * serial)


def window_sizing(protocol: str, size: int, layout: FrameLayout) -> dict:
    """What a window is sized by (:func:`window_and_timeout`'s ``chunks``, ``per`` and ``most``): one slot or
    stream per 16 chunks or blocks; a sparse protocol (OmniReduce) at most 128 streams (every stream's
    discovery round brings a full result frame to every worker; at 8 workers and 25 Mbit/s, 256
    streams of bmv2's 567-byte frames ran into thousands of retransmissions where 128 ran into none or
    a few)."""
    blocks = -(-size // layout.elements)
    return {"chunks": blocks, "per": 16, "most": WINDOW_MAX // 2 if protocols.protocol(protocol).sparse else None}


def gather_time(mbit: float, frame_bytes: int, window: int) -> float:
    """Seconds a worker waits after handling a burst of results before it looks for the next, so that it
    wakes less often and handles more per wake-up (the fixed cost of a wake-up, not the results, is most
    of an emulator's CPU time): half the time its window takes on the link (the rest of the window
    keeps the link busy meanwhile), at most 40 ms."""
    return min(GATHER_MAX, GATHER_FRACTION * window * frame_bytes * 8 / (mbit * 1e6))


def worker_config(net: Network, spec, rank: int, host: str, *, protocol: str = protocols.DEFAULT.name, size: int,
                  dtype: str = "float32", seed: int = 0, density: float = 1.0, window: int | None = None,
                  rto: float | None = None, stall_timeout: float = 10.0, progress=(), hold: bool = False,
                  wait_go: bool = True) -> dict:
    """The config of worker ``rank`` of job ``spec`` on ``host`` (see :mod:`p4gen.testbed.agent`)."""
    layout = FrameLayout(net.agg.plan)
    w = spec.workers[rank]
    if window is None or rto is None:
        win, rto = window_and_timeout(min(ln.mbit for ln in net.topo.links), layout.frame_len, window, net.agg,
                           len(spec.workers), **window_sizing(protocol, size, layout))
        window = min(win, spec.slot_count)
    gather = gather_time(min(ln.mbit for ln in net.topo.links), layout.frame_len, window)
    return {"plan": str(net.agg.plan_dir), "protocol": protocol, "rank": rank, "host": host,
            "n": len(spec.workers), "size": size, "dtype": dtype, "seed": seed, "density": density,
            "job": spec.job, "window": window, "timeout": rto, "max_timeout": max(1.0, 2 * rto),
            "stall_timeout": stall_timeout, "gather": gather, "mac": w.mac, "ip": w.ip, "udp_port": w.udp_port,
            "switch_mac": SWITCH_MAC, "switch_ip": SWITCH_IP, "switch_port": layout.udp_port_min,
            "progress": list(progress), "hold_after_progress": hold, "wait_go": wait_go,
            "out": str(net.workdir / f"result-{host}.npy")}


def _cpu(res: RunResult, switch_cpu: float | None, done: dict[int, dict]) -> None:
    """Fill in the run's CPU seconds (switch, workers) and their sum per MiB aggregated."""
    res.switch_cpu = switch_cpu
    per = [ev.get("cpu") for ev in done.values()]
    res.workers_cpu = None if None in per else sum(per)
    mib = res.workers * res.size * np.dtype(res.dtype).itemsize / 2**20
    if switch_cpu is not None and res.workers_cpu is not None:
        res.cpu_per_mib = (switch_cpu + res.workers_cpu) / mib


def _paths(res: RunResult, net: Network, p0: tuple[int, int, int]) -> None:
    """Fill in which of the switch node's two paths the run's frames took (counted, see p4gen.testbed.l2)."""
    front, to_p4, from_p4 = (b - a for a, b in zip(p0, net.path_counters()))
    res.p4_frames, res.l2_frames = to_p4, front - to_p4
    res.path = (f"{to_p4} frames in to the P4 switch ({net.agg.label}) and {from_p4} out; "
                f"{front - to_p4} through the kernel bridge {net.agg.l2.bridge}")


def _switch_pid_cpu(net: Network) -> tuple[int | None, float | None]:
    proc = net.agg.proc
    return (None, None) if proc is None else (proc.pid, procs.cpu_seconds(proc.pid))


def _switch_cpu(net: Network, pid0: int | None, cpu0: float | None) -> float | None:
    """CPU seconds the switch process ``pid0`` used since it had used ``cpu0`` (None if it was restarted)."""
    proc = net.agg.proc
    if cpu0 is None or proc is None or proc.pid != pid0:
        return None
    now = procs.cpu_seconds(pid0)
    return None if now is None else now - cpu0


def _loss_seen(sent_up: int, recv_down: int, c0: dict, c1: dict, hosts: list[str]) -> float | None:
    """1 - received / sent over both directions of the workers' links: up, the frames the workers sent
    (retransmissions included) against those the far end of their links received; down, the frames the
    far end sent against those the workers' sockets received."""
    recv_up = sum(c1[h][2] - c0[h][2] for h in hosts)
    sent_down = sum(c1[h][3] - c0[h][3] for h in hosts)
    sent = sent_up + sent_down
    return None if sent <= 0 else max(0.0, 1.0 - (recv_up + recv_down) / sent)


def run_switchml(net: Network, *, size: int, dtype: str = "float32", seed: int = 0, density: float = 1.0,
                 window: int | None = None, stall_timeout: float = 10.0, fault: str | None = None,
                 timeout: float = 600.0, protocol: str = protocols.DEFAULT.name, spec=None) -> RunResult:
    """One all-reduce by every host (or by the workers of ``spec``, a job the switch already runs)."""
    if fault is not None and fault not in FAULTS:
        raise TestbedError(f"fault={fault!r} must be one of {', '.join(FAULTS)}")
    topo = net.topo
    plan = net.agg.plan
    layout = FrameLayout(plan)
    mbit = min(ln.mbit for ln in topo.links)
    win, rto = window_and_timeout(mbit, layout.frame_len, window, net.agg, len(spec.workers if spec else topo.hosts),
                       **window_sizing(protocol, size, layout))
    if spec is None:
        win = min(win, plan.params.slots)
        spec = net.job_spec(slot_count=win)
        net.note(f"{protocol}: programming the switch")
        net.program(spec)
    else:
        win = min(win, spec.slot_count)
    n = len(spec.workers)
    names = {h.ip: h.name for h in topo.hosts}
    hosts = [names[w.ip] for w in spec.workers]
    agents = _Agents(net)
    progress = [0.25, 0.5] if fault else []
    for w in spec.workers:
        cfg = worker_config(net, spec, w.id, hosts[w.id], protocol=protocol, size=size, dtype=dtype, seed=seed,
                            density=density, window=win, rto=rto, stall_timeout=stall_timeout, progress=progress,
                            hold=fault == "kill-worker" and w.id == n - 1)
        path = write_file(net.workdir / f"agent-{hosts[w.id]}.json", json.dumps(cfg), WORK, "worker config",
                          TestbedError)
        agents.start(w.id, hosts[w.id], [sys.executable, "-m", "p4gen.testbed.agent", str(path)])
    net.note(f"{protocol}: started {n} workers")
    agents.wait_all("ready", 60.0, "ready")
    net.note(f"{protocol}: {n} workers ready; all-reducing {size} elements, a window of {win} slots")
    c0 = net.link_counters()
    p0 = net.path_counters()
    pid0, cpu0 = _switch_pid_cpu(net)
    agents.go()
    done: dict[int, dict] = {}
    errors: dict[int, str] = {}
    killed: int | None = None
    outcome = None
    deadline = time.monotonic() + timeout
    while len(done) + len(errors) < n:
        try:
            rank, ev = agents.events.get(timeout=max(0.01, deadline - time.monotonic()))
        except queue.Empty:
            raise JobError(f"the all-reduce did not finish in {timeout:.0f} s "
                           f"({len(done)} of {n} workers done); see {net.workdir}") from None
        kind = ev["event"]
        if kind == "done":
            done[rank] = ev
        elif kind == "error":
            errors[rank] = ev["message"]
        elif kind == "exit" and rank not in done and rank not in errors:
            errors[rank] = f"worker {rank} exited with status {ev['rc']}"
        elif kind == "progress" and fault == "kill-worker" and killed is None and rank == n - 1:
            killed = rank
            agents.procs[rank].kill()
        elif kind == "progress" and fault == "restart-switch" and outcome is None and rank == 0:
            outcome = "restarting"
            t_r = time.monotonic()
            net.agg.restart()
            outcome = f"switch {net.agg.name} restarted mid-job (down {time.monotonic() - t_r:.1f} s)"
    if errors:
        others = {r: m for r, m in errors.items() if r != killed}
        if killed is not None and not others and len(done) == n - 1:
            chunks = -(-size // layout.elements)
            raise JobError(f"worker {killed} ({hosts[killed]}) was killed after it had sent every contribution: "
                           f"the other {n - 1} workers finished without it ({chunks} chunks, a window of {win}); "
                           f"a larger tensor puts the kill mid-job")
        if killed is not None:
            first = next(iter(others.values()), "no other worker reported")
            raise JobError(f"worker {killed} ({hosts[killed]}) was killed mid-job; the others stopped "
                           f"with a timeout error ({len(others)} of {n - 1}), e.g. {first}")
        first_rank = min(errors)
        msg = f"{len(errors)} of {n} workers failed; first: {errors[first_rank]}"
        if outcome:
            msg = f"{outcome}; the job failed cleanly: {msg}"
        raise JobError(msg)
    switch_cpu = _switch_cpu(net, pid0, cpu0)
    c1 = net.link_counters()
    total, xs = tensors.expected(n, size, dtype, seed, density, layout.elements)
    k = layout.elements
    blocks = -(-size // k)
    held_blocks = None
    if protocols.protocol(protocol).sparse:
        streams = min(win, blocks)
        checks = [tensors.check_omnireduce(np.load(net.workdir / f"result-{hosts[r]}.npy"), xs, total, k, streams,
                                           layout.value_width) for r in range(n)]
        # a block has a round (and a full result frame on every downlink) iff some worker holds it
        held = np.zeros(blocks, dtype=bool)
        for x in xs:
            held |= np.pad(x, (0, blocks * k - size)).reshape(blocks, k).any(axis=1)
        union = float(held.mean())
        held_blocks = int(held.sum())
    else:
        checks = [tensors.check_switchml(np.load(net.workdir / f"result-{hosts[r]}.npy"), xs, total, k,
                                         layout.value_width) for r in range(n)]
        union = 1.0
    t = max(ev["time"] for ev in done.values())
    bits = size * 4 * 8
    bound = bounds.aggregation(layout, size, mbit, protocol, held_blocks)
    pkt = sum(ev["sent"] for ev in done.values())
    frames_tx = sum(c1[h][0] - c0[h][0] for h in hosts)
    bytes_tx = sum(c1[h][4] - c0[h][4] for h in hosts)
    res = RunResult(protocol, n, size, dtype, density, mbit, net.loss, topo.name, net.agg.label, t, bits / t / 1e6,
                    bound.seconds, 100 * bound.seconds / t, pkt, sum(ev["retransmitted"] for ev in done.values()),
                    bytes_tx / n, max(c.max_abs_error for c in checks), max(c.max_bound for c in checks),
                    all(c.exact for c in checks), all(c.correct for c in checks), fault,
                    (outcome + "; the job recovered") if outcome else None,
                    [{k: v for k, v in ev.items() if k != "event"} for _, ev in sorted(done.items())])
    res.frames_on_links = frames_tx
    res.union_density = union
    offered = sum(ev["sent"] + ev["retransmitted"] for ev in done.values())
    res.loss_seen = _loss_seen(offered, sum(ev["received"] for ev in done.values()), c0, c1, hosts)
    res.loss_method = net.loss_method if net.loss else None
    res.bound_how = bound.how
    res.window = win
    _cpu(res, switch_cpu, done)
    _paths(res, net, p0)
    return res


def run_gloo(net: Network, *, size: int, dtype: str = "float32", seed: int = 0, timeout: float = 600.0,
             port: int = 29500) -> RunResult:
    """torch.distributed all_reduce (Gloo) with one process per host, on the same links and tensor."""
    topo = net.topo
    n = len(topo.hosts)
    # Gloo's frames cross the switch node in its kernel bridge (p4gen.testbed.l2), not the P4 process;
    # the P4 switch is programmed as for the other protocols all the same
    net.note("gloo: programming the switch")
    net.program(net.job_spec())
    master = topo.hosts[0]
    agents = _Agents(net)
    p0 = net.path_counters()            # from before the rendezvous: its frames are counted too
    for r, h in enumerate(topo.hosts):
        env = {"GLOO_SOCKET_IFNAME": h.intf, "MASTER_ADDR": master.ip, "MASTER_PORT": str(port),
               "RANK": str(r), "WORLD_SIZE": str(n), "OMP_NUM_THREADS": "1"}
        cfg = {"size": size, "dtype": dtype, "seed": seed, "rank": r, "out": str(net.workdir / f"gloo-{r}.npy")}
        path = write_file(net.workdir / f"gloo-{r}.json", json.dumps(cfg), WORK, "worker config", TestbedError)
        agents.start(r, h.name, [sys.executable, "-m", "p4gen.testbed.gloo_agent", str(path)], env=env)
    net.note(f"gloo: started {n} workers (each imports torch, then they meet at {master.ip}:{port})")
    agents.wait_all("ready", 180.0, "ready (torch import and Gloo rendezvous)")
    net.note(f"gloo: {n} workers ready; all-reducing {size} elements")
    c0 = net.host_counters()
    r0 = net.tcp_retransmissions()
    pid0, cpu0 = _switch_pid_cpu(net)
    agents.go()
    done = agents.wait_all("done", timeout, "done")
    switch_cpu = _switch_cpu(net, pid0, cpu0)
    c1 = net.host_counters()
    retrans = net.tcp_retransmissions() - r0
    total, _ = tensors.expected(n, size, dtype, seed, 1.0, 256)
    checks = [tensors.check_float(np.load(net.workdir / f"gloo-{r}.npy"), total) for r in range(n)]
    t = max(ev["time"] for ev in done.values())
    mbit = min(ln.mbit for ln in topo.links)
    bits = size * 4 * 8
    bound = bounds.gloo_ring(n, size, mbit, np.dtype(dtype).itemsize, net.mtu)
    frames = sum(c1[h][0] - c0[h][0] for h in c1)
    bytes_tx = sum(c1[h][1] - c0[h][1] for h in c1)
    res = RunResult("gloo", n, size, dtype, 1.0, mbit, net.loss, topo.name, net.agg.label, t, bits / t / 1e6,
                    bound.seconds, 100 * bound.seconds / t, frames, retrans, bytes_tx / n,
                    max(c.max_abs_error for c in checks), max(c.max_bound for c in checks), True,
                    all(c.correct for c in checks),
                    per_worker=[{k: v for k, v in ev.items() if k != "event"} for _, ev in sorted(done.items())],
                    frames_on_links=frames, bound_how=bound.how)
    _cpu(res, switch_cpu, done)
    _paths(res, net, p0)
    return res
