"""The software data plane on AF_PACKET sockets, in a network namespace of its own."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from vethns import sh, veth_namespace

from p4gen.host import codec
from p4gen.build import build
from p4gen.switch.dataplane import DataPlaneError, main as dp_main, parse_addr, parse_port
from p4gen.switch.model import WorkerAddr, job_config
from p4gen.wire import ip, mac
from p4gen.planner import make_plan
from p4gen.spec import make_spec
from p4gen.target import load_target

HERE = Path(__file__).resolve().parent


def test_port_option_is_checked():
    assert parse_port("3=veth3") == (3, "veth3")
    for bad in ("veth", "x=veth", "600=veth", "3="):
        with pytest.raises(DataPlaneError):
            parse_port(bad)


def test_p4runtime_option_is_checked(tmp_path, capsys):
    assert parse_addr("127.0.0.1:9559") == "127.0.0.1:9559"
    for bad in ("127.0.0.1", ":9559", "host:x", "host:70000"):
        with pytest.raises(DataPlaneError):
            parse_addr(bad)
    plan = make_plan(make_spec(slots=4, elements_per_packet=8), load_target("bmv2"))
    (tmp_path / "plan.json").write_text(plan.to_json())
    rc = dp_main(["--plan", str(tmp_path), "--port", "1=p4gtest-none0", "--p4runtime", "nowhere"])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and "--p4runtime 'nowhere'" in err and "\n" not in err


def test_bad_interface_is_a_one_line_error(tmp_path, capsys):
    plan = make_plan(make_spec(slots=4, elements_per_packet=8), load_target("bmv2"))
    (tmp_path / "plan.json").write_text(plan.to_json())
    rc = dp_main(["--plan", str(tmp_path), "--port", "1=p4gtest-none0"])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and err.startswith("p4gen.switch.dataplane:") and "\n" not in err


def test_ring_size_option_is_checked(tmp_path, capsys):
    plan = make_plan(make_spec(slots=4, elements_per_packet=8), load_target("bmv2"))
    (tmp_path / "plan.json").write_text(plan.to_json())
    rc = dp_main(["--plan", str(tmp_path), "--port", "1=p4gtest-none0", "--ring-mb", "0"])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and err == "p4gen.switch.dataplane: --ring-mb 0 must be in 1..1024"
    rc = dp_main(["--plan", str(tmp_path), "--port", "1=p4gtest-none0", "--round-interval", "2"])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and err == "p4gen.switch.dataplane: --round-interval 2.0 must be in 0..1 seconds"




@pytest.fixture()
def netns():
    with veth_namespace([(f"w{i}", f"s{i}") for i in range(3)]) as ns:
        yield ns


@pytest.mark.parametrize("mode,interval", [("int", 0.0), ("float", 0.0), ("float", 0.02)])
def test_allreduce_through_the_dataplane(netns, tmp_path, mode, interval):
    plan = make_plan(make_spec(slots=8, elements_per_packet=64), load_target("bmv2"))
    (tmp_path / "plan.json").write_text(plan.to_json())
    workers = [WorkerAddr(i + 1, mac(f"02:00:00:00:01:0{i}"), ip(f"10.0.1.{i + 1}"), 41000 + i) for i in range(3)]
    cfg = job_config(plan, 1, workers, slot_count=4)
    cfg["groups"][str(plan.params.flood_group_base + 1)] = [[2, 0], [3, 0]]
    (tmp_path / "cfg.json").write_text(json.dumps(cfg))
    stats = tmp_path / "stats.json"
    dp = subprocess.Popen(["ip", "netns", "exec", netns, sys.executable, "-m", "p4gen.switch.dataplane",
                           "--plan", str(tmp_path), "--config", str(tmp_path / "cfg.json"),
                           "--stats", str(stats), "--stats-interval", "0.1",
                           "--port", "1=s0", "--port", "2=s1", "--port", "3=s2", "--round-interval", str(interval)],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    t0 = time.monotonic()
    try:
        for _ in range(100):
            if stats.exists():
                break
            time.sleep(0.05)
        assert stats.exists(), dp.stderr.read() if dp.poll() is not None else "no stats file"
        args = [f"w{i},02:00:00:00:01:0{i},10.0.1.{i + 1},{41000 + i}" for i in range(3)]
        drv = sh("ip", "netns", "exec", netns, sys.executable, str(HERE / "dp_driver.py"),
                  str(tmp_path / "plan.json"), mode, *args)
        out = json.loads(drv.stdout)
        assert all(out["done"]), out
        exact = np.array(out["expected"])
        for r in out["results"]:
            if mode == "int":
                assert r == exact.astype(np.int64).tolist()
            else:
                assert np.allclose(r, exact, atol=codec.error_bound(3, 3) * 2)
    finally:
        rc = _stop(dp)
    elapsed = time.monotonic() - t0
    assert rc == 0, dp.stderr.read()
    final = json.loads(stats.read_text())
    assert final["stats"]["multicast"]["packets"] >= 5
    assert final["ports"]["1"]["rx"] > 0 and final["ports"]["2"]["tx"] > 0
    if interval:            # paced: no two rounds began less than an interval apart
        assert 1 <= final["rounds"] <= elapsed / interval + 1, (final["rounds"], elapsed)


def _stop(dp) -> int:
    """SIGTERM the data plane; its exit code (killed after 10 s without exiting)."""
    dp.send_signal(signal.SIGTERM)
    try:
        return dp.wait(10)
    except subprocess.TimeoutExpired:
        dp.kill()
        return dp.wait()


def _wait_for(path, proc, what):
    for _ in range(200):
        if path.exists():
            return
        if proc.poll() is not None:
            break
        time.sleep(0.05)
    raise AssertionError(f"{what}: " + (proc.stderr.read() if proc.poll() is not None else "timed out"))


def test_p4runtime_programs_the_dataplane(netns, tmp_path):
    """--p4runtime: the controller pushes the program and sets up a job over gRPC; 3 workers all-reduce."""
    out = tmp_path / "build"
    build(make_spec(slots=8, elements_per_packet=64), load_target("bmv2"), out, use_cache=False)
    job = tmp_path / "job.toml"
    lines = ["job = 1", "mgid = 3", "slot_base = 0", "slot_count = 4", 'switch_mac = "02:00:00:00:00:fe"']
    for i in range(3):
        lines += ["[[workers]]", f"id = {i}", f"port = {i + 1}", f'mac = "02:00:00:00:01:0{i}"',
                  f'ip = "10.0.1.{i + 1}"', f"udp_port = {41000 + i}"]
    job.write_text("\n".join(lines) + "\n")
    stats = tmp_path / "stats.json"
    addr = "127.0.0.1:9559"
    dp = subprocess.Popen(["ip", "netns", "exec", netns, sys.executable, "-m", "p4gen.switch.dataplane",
                           "--plan", str(out), "--p4runtime", addr, "--stats", str(stats),
                           "--stats-interval", "0.1", "--port", "1=s0", "--port", "2=s1", "--port", "3=s2"],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        _wait_for(stats, dp, "data plane did not start")
        ctl = ["ip", "netns", "exec", netns, sys.executable, "-m", "p4gen.controller", "ctl"]
        push = sh(*ctl, "push", str(out), "--addr", addr, check=False)
        assert push.returncode == 0, push.stderr
        setup = sh(*ctl, "setup", str(out), str(job), "--addr", addr, check=False)
        assert setup.returncode == 0 and "job 1: 3 workers" in setup.stdout, setup.stderr
        dp.send_signal(signal.SIGHUP)                # refused while the server owns the control plane
        args = [f"w{i},02:00:00:00:01:0{i},10.0.1.{i + 1},{41000 + i}" for i in range(3)]
        drv = sh("ip", "netns", "exec", netns, sys.executable, str(HERE / "dp_driver.py"),
                  str(out / "plan.json"), "int", *args)
        res = json.loads(drv.stdout)
        assert all(res["done"]), res
        exact = np.array(res["expected"]).astype(np.int64).tolist()
        assert all(r == exact for r in res["results"])
        cnt = sh(*ctl, "counters", str(out), "--addr", addr, check=False)
        assert cnt.returncode == 0, cnt.stderr
        multicast = next(ln for ln in cnt.stdout.splitlines() if ln.startswith("multicast"))
        assert int(multicast.split("packets=")[1].split()[0]) >= 5
    finally:
        rc = _stop(dp)
    err = dp.stderr.read()
    assert rc == 0, err
    assert "P4Runtime server listening on 127.0.0.1:9559" in err and "SIGHUP ignored" in err


BURST_SEND = r"""
import socket, sys, time
ifname, path, flen, expect, out = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
data = open(path, "rb").read()
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)
try:
    s.setsockopt(263, 23, 1)                 # PACKET_IGNORE_OUTGOING
except OSError:
    pass
s.setsockopt(socket.SOL_SOCKET, 33, 1 << 24)
s.bind((ifname, 3))
got = []
# runts first, then every contribution back to back (no pacing, no window)
for k in range(int(sys.argv[6])):
    s.send(data[:50 - 12 * (k % 2)])
for i in range(0, len(data), flen):
    s.send(data[i:i + flen])
s.settimeout(0.2)
deadline = time.monotonic() + 30
while len(got) < expect and time.monotonic() < deadline:
    try:
        f, a = s.recvfrom(65536)
    except socket.timeout:
        continue
    if a[2] != 4:
        got.append(f)
open(out, "wb").write(b"".join(len(f).to_bytes(4, "big") + f for f in got))
"""


@pytest.mark.parametrize("io", ["ring", "socket"])
def test_burst_from_two_senders_is_aggregated_without_loss(netns, tmp_path, io):
    """Two sender processes blast 1500 contributions each, no window: every chunk's result comes back with
    the exact sum, the data plane reads each frame once (not its own transmissions) and counts runts; on
    packet rings and on per-frame sockets (--no-rings, said once on stderr)."""
    from p4gen import wire as W
    from p4gen.host import packet as P

    chunks, runts = 1500, 3
    plan = make_plan(make_spec(slots=2048, elements_per_packet=64), load_target("bmv2"))
    (tmp_path / "plan.json").write_text(plan.to_json())
    L = W.FrameLayout(plan)
    workers = [WorkerAddr(i + 1, mac(f"02:00:00:00:01:0{i}"), ip(f"10.0.1.{i + 1}"), 41000 + i) for i in range(2)]
    (tmp_path / "cfg.json").write_text(json.dumps(job_config(plan, 1, workers)))
    switch = P.endpoint("02:00:00:00:00:fe", "10.0.0.254", 48864)
    base = np.arange(64, dtype=np.int64)
    for i, w in enumerate(workers):           # every chunk in a slot of its own: order between senders is free
        (tmp_path / f"w{i}.bin").write_bytes(b"".join(
            P.contribution_frame(L, P.Endpoint(w.mac, w.ip, w.udp_port), switch, job=1, tsi=c, pool_index=c,
                                 exponent=127, values=(base + 64 * c) * (i + 1))
            for c in range(chunks)))
    stats = tmp_path / "stats.json"
    dp = subprocess.Popen(["ip", "netns", "exec", netns, sys.executable, "-m", "p4gen.switch.dataplane",
                           "--plan", str(tmp_path), "--config", str(tmp_path / "cfg.json"),
                           "--stats", str(stats), "--stats-interval", "0.1", "--port", "1=s0", "--port", "2=s1"]
                          + (["--no-rings"] if io == "socket" else []),
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        _wait_for(stats, dp, "data plane did not start")
        senders = [subprocess.Popen(["ip", "netns", "exec", netns, sys.executable, "-c", BURST_SEND, f"w{i}",
                                     str(tmp_path / f"w{i}.bin"), str(L.frame_len), str(chunks),
                                     str(tmp_path / f"got{i}.bin"), str(runts)],
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                   for i in range(2)]
        for p in senders:
            _out, err = p.communicate(timeout=60)
            assert p.returncode == 0, err
    finally:
        rc = _stop(dp)
    err = dp.stderr.read()
    assert rc == 0, err
    note = [ln for ln in err.splitlines() if "packet rings" in ln]
    if io == "socket":
        assert note == ["p4gen.switch.dataplane: packet rings unavailable on s0, s1 (rings turned off): "
                        "those ports read and send one frame per system call"], err
    else:
        assert note == [], err
    final = json.loads(stats.read_text())
    for i in range(2):
        blob = (tmp_path / f"got{i}.bin").read_bytes()
        frames, k = [], 0
        while k < len(blob):
            n = int.from_bytes(blob[k:k + 4], "big")
            frames.append(blob[k + 4:k + 4 + n])
            k += 4 + n
        results = {}
        for f in frames:
            r = P.parse_result(L, f)
            results[r.tsi] = r.values.astype(np.int64).tolist()
        assert len(frames) == chunks and sorted(results) == list(range(chunks)), (i, len(frames), final)
        assert all(results[c] == ((base + 64 * c) * 3).tolist() for c in range(chunks))
    st = {k: v["packets"] for k, v in final["stats"].items()}
    assert st["absorbed"] == chunks and st["multicast"] == chunks and st["drop_malformed"] == 2 * runts, st
    for p in ("1", "2"):             # every frame read once: the results it sent are not read back
        port = final["ports"][p]
        assert port["rx"] == chunks + runts and port["tx"] == chunks and port["rx_dropped"] == 0, port
        assert port["io"] == io and port["rx_freezes"] == 0, port
    assert final["tx_errors"] == 0 and final["rx_errors"] == 0


def test_ring_slots_hold_the_largest_frame_of_the_plans_target():
    from p4gen.switch.dataplane import frame_slot, mtu_frame
    from p4gen.wire import FrameLayout

    assert frame_slot(1514) == 2048 and frame_slot(2000) == 2048       # 48 bytes of slot header and the frame
    assert frame_slot(2001) == 3072 and frame_slot(9014) == 9216
    for target, frame, slot in (("bmv2", 1514, 2048), ("soft", 9014, 9216)):
        plan = make_plan(make_spec(protocol="switchml", slots=64, max_workers=4), load_target(target))
        assert mtu_frame(plan) == max(frame, FrameLayout(plan).frame_len) == frame
        assert frame_slot(mtu_frame(plan)) == slot


# -- 802.1Q: the kernel strips a received tag; the data plane puts it back and treats the frame as the model does
VLAN_CHILD = r"""
import json, select, socket, struct, sys, time
spec = json.loads(sys.argv[1])
SOL_PACKET, PACKET_AUXDATA, VLAN_VALID, TPID_VALID = 263, 8, 1 << 4, 1 << 6

def tagged(frame, ancillary):
    # what was on the wire: the tag the kernel took out put back (read here, not through p4gen.netio)
    for level, kind, data in ancillary:
        if level == SOL_PACKET and kind == PACKET_AUXDATA:
            status, _l, _s, _m, _n, tci, tpid = struct.unpack_from("=IIIHHHH", data)
            if status & VLAN_VALID:
                return frame[:12] + struct.pack("!HH", tpid if status & TPID_VALID else 0x8100, tci) + frame[12:]
    return frame

tx = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)
tx.bind(("w0", 0))
rx = {}
for i in (1, 2):
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3))
    s.setsockopt(SOL_PACKET, PACKET_AUXDATA, 1)
    s.bind((f"w{i}", 0))
    s.setblocking(False)
    rx[i + 1] = s
got = {str(p): [] for p in rx}
for f in spec["frames"]:
    tx.send(bytes.fromhex(f))
end = time.monotonic() + 1.5
while time.monotonic() < end:
    for p, s in rx.items():
        try:
            while True:
                data, anc, _fl, addr = s.recvmsg(65536, 256)
                if addr[2] != 4:                               # not one this socket's host sent
                    got[str(p)].append(tagged(data, anc).hex())
        except BlockingIOError:
            pass
    time.sleep(0.01)
print(json.dumps(got))
"""


@pytest.mark.parametrize("rings", [True, False], ids=["rings", "sockets"])
def test_tagged_frames_are_forwarded_on_l2_with_their_tag_as_the_model_does(netns, tmp_path, rings):
    from p4gen.host import packet as P
    from p4gen.switch.model import SwitchModel
    from p4gen.wire import FrameLayout

    plan = make_plan(make_spec(slots=8, elements_per_packet=64), load_target("bmv2"))
    (tmp_path / "plan.json").write_text(plan.to_json())
    workers = [WorkerAddr(i + 1, mac(f"02:00:00:00:01:0{i}"), ip(f"10.0.1.{i + 1}"), 41000 + i) for i in range(3)]
    cfg = job_config(plan, 1, workers, slot_count=4)
    cfg["groups"][str(plan.params.flood_group_base + 1)] = [[2, 0], [3, 0]]
    cfg["tables"]["l2_forward"] = [{"match": {"dst_addr": w.mac}, "action": "l2_unicast", "params": {"port": w.port}}
                                   for w in workers]
    (tmp_path / "cfg.json").write_text(json.dumps(cfg))
    layout = FrameLayout(plan)
    switch = P.endpoint("02:00:00:00:00:fe", "10.0.0.254", 48864)
    contribution = P.contribution_frame(layout, P.endpoint("02:00:00:00:01:00", "10.0.1.1", 41000), switch, job=1,
                                        tsi=0, pool_index=0, exponent=0, values=np.arange(64))

    def tag(frame: bytes, tpid: int, tci: int) -> bytes:
        return frame[:12] + tpid.to_bytes(2, "big") + tci.to_bytes(2, "big") + frame[12:]

    to_w1 = bytes.fromhex("020000000101" "020000000100") + b"\x88\xb5" + bytes(range(50))
    frames = [tag(contribution, 0x8100, 0x0064),            # a worker's contribution inside VLAN 100
              tag(contribution, 0x8100, 0x0000),            # priority-tagged (VID 0): still tagged
              tag(tag(contribution, 0x8100, 0x2005), 0x88A8, 0x0007),   # QinQ
              tag(to_w1, 0x8100, 0x0ABC)]                   # tagged L2 traffic to worker 1's MAC
    model = SwitchModel(plan)
    model.load_config(str(tmp_path / "cfg.json"))
    want = {"2": [], "3": []}
    for f in frames:
        for eport, out in model.process(f, 1):
            want[str(eport)].append(bytes(out).hex())
    assert want["2"] and want["3"] and all(len(bytes.fromhex(h)) >= len(contribution) + 4 for h in want["3"])
    stats = tmp_path / "stats.json"
    dp = subprocess.Popen(["ip", "netns", "exec", netns, sys.executable, "-m", "p4gen.switch.dataplane",
                           "--plan", str(tmp_path), "--config", str(tmp_path / "cfg.json"), "--stats", str(stats),
                           "--stats-interval", "0.1", "--port", "1=s0", "--port", "2=s1", "--port", "3=s2"]
                          + ([] if rings else ["--no-rings"]), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        for _ in range(100):
            if stats.exists():
                break
            time.sleep(0.05)
        assert stats.exists(), dp.stderr.read() if dp.poll() is not None else "no stats file"
        child = sh("ip", "netns", "exec", netns, sys.executable, "-c", VLAN_CHILD,
                   json.dumps({"frames": [f.hex() for f in frames]}))
        got = json.loads(child.stdout)
    finally:
        rc = _stop(dp)
    assert rc == 0, dp.stderr.read()
    assert got == want
    counts = {k: v["packets"] for k, v in json.loads(stats.read_text())["stats"].items()}
    assert counts["absorbed"] == 0 and counts["l2_flood"] == 3 and counts["l2_unicast"] == 1


OVERSIZED_CHILD = r"""
import json, socket, sys, time
spec = json.loads(sys.argv[1])
tx = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)
tx.bind(("w0", 0))
rx = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3))
rx.bind(("w1", 0))
rx.setblocking(False)
got = []
head = bytes.fromhex(spec["head"])
for n in spec["lengths"]:
    tx.send(head + bytes(n - len(head)))
    time.sleep(0.2)
end = time.monotonic() + 1.5
while time.monotonic() < end:
    try:
        while True:
            data, addr = rx.recvfrom(65536)
            if addr[2] != 4:
                got.append(len(data))
    except BlockingIOError:
        time.sleep(0.01)
print(json.dumps(got))
"""


@pytest.mark.parametrize("rings", [True, False], ids=["rings", "sockets"])
def test_frames_longer_than_a_ring_block_are_counted_and_dropped_and_forwarding_goes_on(netns, tmp_path, rings):
    """A 40,000-byte and a 65,535-byte frame (longer than a receive ring's 32 KiB block, and than any frame of
    the plan's target) are counted as ``rx_oversized`` and dropped; the frames before and after them are
    forwarded.  Before, the first such frame on rings ended the data plane ("take() again before release()")."""
    plan = make_plan(make_spec(slots=8, elements_per_packet=64), load_target("bmv2"))
    (tmp_path / "plan.json").write_text(plan.to_json())
    cfg = {"tables": {}, "groups": {str(plan.params.flood_group_base + 1): [[2, 0]]}}
    (tmp_path / "cfg.json").write_text(json.dumps(cfg))
    for dev in ("w0", "s0"):
        sh("ip", "-n", netns, "link", "set", dev, "mtu", "65535")
    head = bytes.fromhex("ffffffffffff" "020000000100") + b"\x88\xb5"          # flooded: to port 2
    lengths = [114, 40000, 114, 65535, 114]
    stats = tmp_path / "stats.json"
    dp = subprocess.Popen(["ip", "netns", "exec", netns, sys.executable, "-m", "p4gen.switch.dataplane",
                           "--plan", str(tmp_path), "--config", str(tmp_path / "cfg.json"), "--stats", str(stats),
                           "--stats-interval", "0.1", "--port", "1=s0", "--port", "2=s1"]
                          + ([] if rings else ["--no-rings"]), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        _wait_for(stats, dp, "the data plane did not start")
        child = sh("ip", "netns", "exec", netns, sys.executable, "-c", OVERSIZED_CHILD,
                   json.dumps({"head": head.hex(), "lengths": lengths}))
        got = json.loads(child.stdout)
        assert dp.poll() is None, dp.stderr.read()
    finally:
        rc = _stop(dp)
    assert rc == 0, dp.stderr.read()
    final = json.loads(stats.read_text())
    port = final["ports"]["1"]
    print(f"{'rings' if rings else 'sockets'}: port 1 {port}, rx_errors {final['rx_errors']}, "
          f"l2_flood {final['stats']['l2_flood']['packets']}")
    assert got == [114] * 3
    assert port["io"] == ("ring" if rings else "socket")
    assert port["rx_oversized"] == 2 and port["rx"] == 3 and final["rx_errors"] == 0
    assert final["stats"]["l2_flood"]["packets"] == 3


GARBAGE_CHILD = r"""
import grpc, sys
ch = grpc.insecure_channel(sys.argv[1])
raw = ch.stream_stream("/p4.v1.P4Runtime/StreamChannel", request_serializer=lambda b: b,
                       response_deserializer=lambda b: b)
codes = set()
for _ in range(int(sys.argv[2])):
    try:
        list(raw(iter([b"\xff\xff\xff\xff garbage"]), timeout=20))
    except grpc.RpcError as exc:
        codes.add(exc.code().name)
print(",".join(sorted(codes)))
"""


def _children(pid: int) -> set[int]:
    """The processes whose parent is ``pid`` (its Read helper and multiprocessing's tracker)."""
    out = set()
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if int((d / "stat").read_text().rsplit(")", 1)[1].split()[1]) == pid:
                    out.add(int(d.name))
            except (OSError, IndexError, ValueError):
                pass
    return out


def _alive(pid: int) -> bool:
    try:
        return (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.parametrize("how", ["SIGTERM", "SIGKILL"])
def test_the_data_plane_and_its_helpers_end_on_a_signal_after_streams_of_garbage(netns, tmp_path, how):
    """20 StreamChannels carrying garbage, then SIGTERM: the data plane exits 0 within 10 s and its Read
    helper with it; after SIGKILL the helper ends too.  Before, SIGTERM never ended it (the server's stop
    waited for the garbage streams' calls forever) and SIGKILL left the helper running."""
    out = tmp_path / "b"
    build(make_spec(slots=8), load_target("bmv2"), out, use_cache=False)
    addr = "127.0.0.1:9561"
    dp = subprocess.Popen(["ip", "netns", "exec", netns, sys.executable, "-m", "p4gen.switch.dataplane",
                           "--plan", str(out), "--port", "1=s0", "--p4runtime", addr],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 30
        while "forwarding" not in (line := dp.stderr.readline()):
            assert line and time.monotonic() < deadline, f"the data plane did not start: {line}{dp.stderr.read()}"
        helpers = set()
        while not helpers and time.monotonic() < deadline:
            helpers = _children(dp.pid)
            time.sleep(0.1)
        assert helpers, "no Read helper was started"
        codes = sh("ip", "netns", "exec", netns, sys.executable, "-c", GARBAGE_CHILD, addr, "20").stdout.strip()
        t0 = time.monotonic()
        dp.send_signal(getattr(signal, how))
        try:
            rc = dp.wait(15)
        except subprocess.TimeoutExpired:
            rc = None
        took = time.monotonic() - t0
        while any(_alive(h) for h in helpers) and time.monotonic() < t0 + 15:
            time.sleep(0.1)
        left = [h for h in helpers if _alive(h)]
    finally:
        if dp.poll() is None:
            dp.kill()
            dp.wait()
    assert rc == (0 if how == "SIGTERM" else -signal.SIGKILL) and took < 10, (rc, took)
    assert not left, f"helper processes {left} outlived the data plane"
    assert codes == "INVALID_ARGUMENT"
