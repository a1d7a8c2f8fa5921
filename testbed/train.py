"""Training on the testbed: one ``torchrun`` per Mininet host, gradients through the switch or Gloo.

:func:`run_train` starts ``python -m torch.distributed.run --nnodes N
--node-rank i --nproc-per-node 1 -m p4gen.torch.train ...`` on host i (rank
0's host is the rendezvous master), waits for every one of them and returns
rank 0's run record (``p4gen.torch.train``).  For SwitchML and OmniReduce
the switch is programmed with the job first, and the job file the hook
reads is written from the same :class:`JobSpec`, so the workers table and
the hook agree on every address.  Gloo runs on the same links; its traffic,
like every run's rendezvous, crosses the switch node in its kernel bridge,
not the P4 process (:mod:`p4gen.testbed.l2`).
"""

from __future__ import annotations

import json
import sys
import time

from p4gen.cliargs import seconds
from p4gen.filewrite import JSON, PNG, WORK, write_file

from p4gen import protocols
from p4gen.extras import lacking
from p4gen.plan import Plan
from p4gen.torch.models import MODELS

from .errors import JobError, TestbedError
from .network_options import (add_network_options, check_network_options, network_from_options,
                              unwind_on_sigterm)
from .topo import SWITCH_IP, SWITCH_MAC
from .train_stats import GLOO, summary_line

TYPE_CHECKING = False                 # the types only: `p4gen --help` does not import Mininet or numpy
if TYPE_CHECKING:
    from .net import Network
    from .program import JobSpec

PROTOCOLS = protocols.protocol_names() + (GLOO,)


def job_toml(spec: JobSpec) -> str:
    """The controller job file (``p4gen.jobfile``) of ``spec``."""
    lines = [f"job = {spec.job}", f"mgid = {spec.mgid}", f"slot_base = {spec.slot_base}",
             f"slot_count = {spec.slot_count}", f'switch_mac = "{SWITCH_MAC}"', ""]
    for w in spec.workers:
        lines += ["[[workers]]", f"id = {w.id}", f"port = {w.port}", f'mac = "{w.mac}"', f'ip = "{w.ip}"',
                  f"udp_port = {w.udp_port}", ""]
    return "\n".join(lines)


def pacing(net: Network, protocol: str, size: int) -> dict:
    """The hook's window (the job's slots), first timeout, largest timeout and gather time for a gradient of
    ``size`` elements on ``net``'s links: as the testbed's worker emulators size theirs for a tensor of that
    size (:func:`p4gen.testbed.harness.window_and_timeout` and ``gather_time``), the window no larger than
    the gradient's chunks (SwitchML sends a window more than the chunks, for the exponents), and no
    gathering for OmniReduce (a stream has one round in flight and waits for it: time spent gathering
    would add to every round)."""
    from p4gen.wire import FrameLayout

    from .harness import gather_time, window_and_timeout, window_sizing

    layout = FrameLayout(net.agg.plan)
    mbit = min(ln.mbit for ln in net.topo.links)
    sizing = window_sizing(protocol, size, layout)
    w, rto = window_and_timeout(mbit, layout.frame_len, None, net.agg, len(net.topo.hosts), **sizing)
    w = max(1, min(w, sizing["chunks"]))
    gather = 0.0 if protocols.protocol(protocol).sparse else gather_time(mbit, layout.frame_len, w)
    return {"window": w, "timeout": rto, "max_timeout": max(1.0, 2 * rto), "gather": gather}


def run_train(net: Network, *, protocol: str, model: str = "mlp", epochs: int = 1, per_bucket: bool = False,
              batch: int = 16, seed: int = 0, port: int = 29500, bucket_mb: float | None = None,
              timeout: float = 1200.0, stall_timeout: float = 20.0, progress=None) -> dict:
    """Train on every host of ``net``; rank 0's record, with the wall time of the whole run, the link rate
    and MTU, and the hook's pacing (:func:`pacing`) added.  ``progress``: called with each progress line
    rank 0 prints (``p4gen.torch.train: progress: ...``), as it comes."""
    if protocol not in PROTOCOLS:
        raise TestbedError(f"protocol={protocol!r} must be one of {', '.join(PROTOCOLS)}")
    pace = None
    if protocol != GLOO:
        built = Plan.load(net.plan_dir).protocol
        if built != protocol:
            raise TestbedError(f"--protocol {protocol}: the switch's build is for {built}")
        from p4gen.torch.models import parameters

        pace = pacing(net, protocol, parameters(model))
    topo = net.topo
    n = len(topo.hosts)
    spec = net.job_spec(slot_count=pace["window"] if pace else 32)
    net.program(spec)                 # the job (Gloo's TCP takes the switch node's kernel bridge)
    job_file = write_file(net.workdir / f"train-job-{protocol}.toml", job_toml(spec), WORK, "job file", TestbedError)
    out = net.workdir / f"train-{protocol}-{model}.json"
    master = topo.hosts[0]
    args = ["-m", "p4gen.torch.train", "--protocol", protocol, "--model", model, "--epochs", str(epochs),
            "--batch", str(batch), "--seed", str(seed), "--out", str(out), "--stall-timeout", str(stall_timeout)]
    if pace is not None:
        args += ["--plan", str(net.plan_dir), "--job", str(job_file), "--switch", SWITCH_IP,
                 "--timeout", f"{pace['timeout']:.4f}", "--max-timeout", f"{pace['max_timeout']:.4f}",
                 "--gather", f"{pace['gather']:.4f}"]
    if per_bucket:
        args.append("--per-bucket")
    if bucket_mb is not None:
        args += ["--bucket-mb", str(bucket_mb)]
    procs = []
    t0 = time.monotonic()
    for r, h in enumerate(topo.hosts):
        # torchrun's own files (its log directory, anything else it puts in the temporary directory) go
        # into the network's work directory, which the network removes: none is left in /tmp
        argv = [sys.executable, "-m", "torch.distributed.run", f"--nnodes={n}", f"--node-rank={r}",
                "--nproc-per-node=1", f"--master-addr={master.ip}", f"--master-port={port}",
                f"--log-dir={net.workdir / f'torchrun-{protocol}-{r}'}"] + args
        env = {"GLOO_SOCKET_IFNAME": h.intf, "OMP_NUM_THREADS": "1", "TMPDIR": str(net.workdir)}
        procs.append(net.spawn(h.name, argv, f"train-{protocol}-{r}.log", env=env))
    deadline = t0 + timeout
    relay = _Relay(procs[0].log, progress)
    for r, p in enumerate(procs):
        while p.alive():
            if time.monotonic() > deadline:
                raise JobError(f"training ({protocol}) did not finish within {timeout:g} s; "
                               f"see {net.workdir}/train-{protocol}-{r}.log")
            relay.poll()
            time.sleep(0.2)
        if p.popen.returncode != 0:
            raise JobError(f"torchrun on {topo.hosts[r].name} ({protocol}) exited with {p.popen.returncode}: "
                           f"{_reason(p)}; see {net.workdir}/train-{protocol}-{r}.log")
    rec = json.loads(out.read_text())
    rec["wall_s"] = time.monotonic() - t0
    rec["mbit"] = min(ln.mbit for ln in topo.links)
    rec["mtu"] = net.mtu
    rec["target"] = Plan.load(net.plan_dir).target.name
    if pace is not None:
        rec["pacing"] = pace
    return rec


class _Relay:
    """Hands the progress lines that appear in a log to ``progress`` (None: reads nothing)."""

    PREFIX = "p4gen.torch.train: progress: "

    def __init__(self, log, progress):
        self.log, self.progress, self.pos, self.part = log, progress, 0, ""

    def poll(self) -> None:
        if self.progress is None:
            return
        try:
            with open(self.log, "rb") as f:
                f.seek(self.pos)
                data = f.read()
        except OSError:
            return
        self.pos += len(data)
        *lines, self.part = (self.part + data.decode(errors="replace")).split("\n")
        for ln in lines:
            if ln.startswith(self.PREFIX):
                self.progress(ln[len(self.PREFIX):])


def _reason(proc) -> str:
    """The training script's own one-line error (``p4gen.torch.train: rank R: ...``) from a log that
    torchrun ends with its own banner; else the log's last line."""
    lines = proc.tail(400).split(" | ")
    own = [ln.strip() for ln in lines if ln.startswith("p4gen.torch.train: ")]
    return own[-1] if own else lines[-1].strip()


# -- p4gen testbed train -------------------------------------------------------------------------
def _protocols(text: str) -> list[str]:
    names = [p.strip() for p in text.split(",")]
    bad = [p for p in names if p not in PROTOCOLS]
    if bad or len(set(names)) != len(names):
        raise TestbedError(f"--protocol {text!r} must list some of {', '.join(PROTOCOLS)} once each, "
                           "separated by commas")
    return names


def _cmd_train(args) -> int:
    why = lacking("p4gen testbed train", "torch", "sklearn")
    if why:
        raise TestbedError(why)
    check_network_options(args)
    wanted = _protocols(args.protocol)               # before torch is imported: a typo is refused at once

    from p4gen.torch.parity import compare
    from p4gen.torch.models import dataset

    if args.png:
        why = lacking("--png", "matplotlib")          # before the runs, not after them
        if why:
            raise TestbedError(why)
    records: dict[str, dict] = {}

    def say(text: str) -> None:
        print(text, flush=True)

    def runs():
        for proto in wanted:
            say(f"{proto}: building the {args.target} build and a {args.topo} network of {args.workers} hosts on "
                f"{args.bw:g} Mbit/s links")
            with network_from_options(args, protocols.DEFAULT.name if proto == GLOO else proto) as net:
                if args.loss:
                    say(net.set_loss(args.loss))
                say(f"{proto}: network up (work directory {net.workdir}); torchrun on every host, {args.model}, "
                    f"{args.epochs} epoch(s); the first step takes longest")
                rec = run_train(net, protocol=proto, model=args.model, epochs=args.epochs,
                                per_bucket=args.per_bucket and proto != GLOO, seed=args.seed,
                                timeout=args.timeout, progress=lambda line, p=proto: say(f"{p}: {line}"))
            records[proto] = rec
            say(summary_line(rec))
    unwind_on_sigterm(runs)
    ok = True
    if GLOO in records:
        test_samples = len(dataset(args.model, args.seed)[3])
        for proto in (p for p in wanted if p != GLOO):
            par = compare(records[proto], records[GLOO], test_samples)
            print(par.line(f"{proto} against gloo"))
            records[proto]["parity"] = par.__dict__
            ok &= par.ok
    if args.json:
        write_file(args.json, json.dumps(records), JSON, "results file", TestbedError)
    if args.png:
        from .train_plot import plot

        plot(records, args.png)
    return 0 if ok else 1


def register(sub) -> None:
    """``p4gen testbed train``: on the subparsers of ``p4gen testbed``."""
    from p4gen.cliargs import int_in

    t = sub.add_parser("train", help="train on the digits with torchrun on every host, gradients through the "
                                     "switch or Gloo; compare with Gloo")
    t.add_argument("--protocol", default=protocols.DEFAULT.name,
                   help=f"{', '.join(PROTOCOLS)} (default {protocols.DEFAULT.name}), or several, one run each: "
                        f"{GLOO},{protocols.DEFAULT.name}")
    add_network_options(t)
    t.add_argument("--model", choices=MODELS, default="mlp",
                   help="mlp (default) or wide (1.1 M parameters): dense gradients on the digits; embbag (an "
                        "EmbeddingBag on the digits) or rec (a click model, 1.1 M parameters): block-sparse "
                        "gradients (see docs/training.md)")
    t.add_argument("--epochs", type=int_in(1, 10000, "epochs"), default=1, help="epochs of the digits per run (default 1)")
    t.add_argument("--per-bucket", action="store_true", help="step each bucket as its sum lands")
    t.add_argument("--seed", type=int, default=0, help="seed of the data split and the model (default 0)")
    t.add_argument("--timeout", type=seconds(), default=1800.0, help="seconds for each training run (default 1800)")
    t.add_argument("--json", metavar="PATH", help="write the run records (and the parity verdicts) as JSON")
    t.add_argument("--png", metavar="PATH", help="plot loss against time and step, accuracy per epoch and step time "
                                              "per protocol (needs matplotlib)")
    t.set_defaults(func=_cmd_train)
