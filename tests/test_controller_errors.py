"""Every controller error a user can meet, with its exact message, over loopback gRPC."""

from __future__ import annotations

import json
import socket
import threading
import time
from pathlib import Path

import pytest
from p4.v1 import p4runtime_pb2

from p4gen.build import build
from p4gen.controller import (ArbitrationError, Controller, JobConflictError, JobFileError, PipelineError,
                              SwitchError, SwitchUnreachableError, WriteError, connect, load_build, load_job)
from p4gen.controller.cli import main as ctl_main
from p4gen.controller.entities import PlanEntities, update
from p4gen.controller.job_control import SwitchView
from p4gen.switch.model import SwitchModel
from p4gen.switch.p4rt_server import P4RuntimeServer, ServerError
from p4gen.spec import make_spec
from p4gen.target import load_target

HERE = Path(__file__).resolve().parent
BAD = HERE / "data" / "bad_jobs"
EXAMPLES = HERE.parent / "controller" / "examples"
INSERT = p4runtime_pb2.Update.INSERT


@pytest.fixture(scope="module")
def builds(tmp_path_factory):
    root = tmp_path_factory.mktemp("ctl-err")
    out = {}
    for slots in (64, 128):
        out[slots] = root / f"bmv2-{slots}"
        build(make_spec(slots=slots, elements_per_packet=16), load_target("bmv2"), out[slots], use_cache=False)
    return out


@pytest.fixture
def switch(builds):
    before = set(threading.enumerate())
    model = SwitchModel(load_build(builds[64]).plan)
    with P4RuntimeServer(model) as server:
        yield model, server
    leftover = [t for t in threading.enumerate() if t not in before and t.is_alive()]
    assert not leftover, f"threads left behind: {leftover}"


@pytest.fixture
def pushed(builds, switch):
    model, server = switch
    with connect(server.addr, election_id=100) as conn:
        Controller(load_build(builds[64]), conn).push()
    return model, server


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ---------------------------------------------------------------- connection
def test_unreachable_switch_fails_fast():
    addr = f"127.0.0.1:{free_port()}"
    t0 = time.monotonic()
    with pytest.raises(SwitchUnreachableError) as exc:
        connect(addr, timeout=0.5)
    assert str(exc.value) == f"switch at {addr} did not answer within 0.5 s"
    assert time.monotonic() - t0 < 3


def test_unreachable_switch_cli_line(builds, capsys):
    addr = f"127.0.0.1:{free_port()}"
    assert ctl_main(["ctl", "counters", str(builds[64]), "--addr", addr, "--timeout", "0.3"]) == 1
    assert capsys.readouterr().err == f"p4gen: error: switch at {addr} did not answer within 0.3 s\n"


def test_server_address_in_use(switch):
    model, server = switch
    with pytest.raises(ServerError) as exc:
        P4RuntimeServer(model, server.addr).start()
    assert str(exc.value) == f"P4Runtime server cannot listen on {server.addr} (address in use or invalid)"


# ---------------------------------------------------------------- arbitration
def test_only_the_primary_writes(builds, pushed):
    model, server = pushed
    b = load_build(builds[64])
    job = load_job(EXAMPLES / "job1.toml", b.plan)
    with connect(server.addr, election_id=10) as primary:
        with connect(server.addr, election_id=5, require_primary=False) as backup:
            assert primary.is_primary and not backup.is_primary
            assert backup.primary_election_id == 10
            with pytest.raises(ArbitrationError) as exc:
                Controller(b, backup).setup(job)
            assert str(exc.value) == (f"switch at {server.addr} refused Write: this controller (election id 5) is "
                                      f"not the primary: Write with election id 5 refused: the primary's is 10")
            with pytest.raises(ArbitrationError) as exc:
                connect(server.addr, election_id=7)
            assert str(exc.value) == (f"switch at {server.addr} has a primary controller with election id 10; this "
                                      f"controller's election id 7 is lower (pass a higher --election-id)")
            assert model.dump_config()["tables"]["workers"] == []
            Controller(b, primary).setup(job)
            primary.close()
            deadline = time.monotonic() + 5
            while not backup.is_primary and time.monotonic() < deadline:
                time.sleep(0.01)
            assert backup.is_primary      # the switch told the backup it is primary now
            Controller(b, backup).teardown(1)
    assert model.dump_config()["tables"]["workers"] == []


def test_election_id_in_use(pushed):
    model, server = pushed
    with connect(server.addr, election_id=10):
        with pytest.raises(ArbitrationError) as exc:
            connect(server.addr, election_id=10)
    assert str(exc.value) == (f"switch at {server.addr} refused arbitration: election id 10 is in use by another "
                              f"controller")


def test_unknown_device_id(switch):
    model, server = switch
    with pytest.raises(ArbitrationError) as exc:
        connect(server.addr, device_id=7)
    assert str(exc.value) == (f"switch at {server.addr} refused arbitration: device id 7 is not served here "
                              f"(this is device 0)")


# ---------------------------------------------------------------- pipeline
def test_push_of_another_program_is_rejected(builds, switch):
    model, server = switch
    with connect(server.addr) as conn:
        with pytest.raises(PipelineError) as exc:
            Controller(load_build(builds[128]), conn).push()
    assert str(exc.value) == (f"switch at {server.addr} rejected the pipeline: the P4Info does not match the program "
                              f"this switch runs (p4gen-switchml-hardened): register P4genIngress.chunk "
                              f"(id 369098753) has size 256; the switch's program has size 128")


def test_setup_against_another_program_is_refused(builds, pushed):
    model, server = pushed
    other = load_build(builds[128])
    with connect(server.addr) as conn:
        with pytest.raises(PipelineError) as exc:
            Controller(other, conn).setup(load_job(EXAMPLES / "job1.toml", other.plan))
    assert str(exc.value) == (f"switch at {server.addr} runs another program than {builds[128]}: its P4Info "
                              f"register P4genIngress.chunk (id 369098753) has size 128; the plan has size 256; run "
                              f"`p4gen ctl push {builds[128]}` first")


def test_setup_before_push(builds, switch):
    model, server = switch
    b = load_build(builds[64])
    with connect(server.addr) as conn:
        with pytest.raises(PipelineError) as exc:
            Controller(b, conn).setup(load_job(EXAMPLES / "job1.toml", b.plan))
    assert str(exc.value) == (f"switch at {server.addr} has no pipeline (no forwarding pipeline config has been "
                              f"set); run `p4gen ctl push BUILD_DIR` first")


def test_build_dir_missing(tmp_path, capsys):
    assert ctl_main(["ctl", "push", str(tmp_path / "nope"), "--addr", "127.0.0.1:1"]) == 1
    assert capsys.readouterr().err == (f"p4gen: error: build directory {str(tmp_path / 'nope')!r} does not exist "
                                       f"(run p4gen build first)\n")


# ---------------------------------------------------------------- write batches
def test_failed_batch_reports_each_update(builds, pushed):
    model, server = pushed
    b = load_build(builds[64])
    e = PlanEntities(b.plan)
    entry = e.table_entry("l2_forward", {"dst_addr": 0x020000000001}, "l2_unicast", {"port": 1})
    other = e.table_entry("l2_forward", {"dst_addr": 0x020000000002}, "l2_unicast", {"port": 2})
    const = e.table_entry("dt_chunk", {}, "chunk_advance_window", {})
    clone = p4runtime_pb2.Entity()
    clone.packet_replication_engine_entry.clone_session_entry.session_id = 5
    with connect(server.addr) as conn:
        with pytest.raises(WriteError) as exc:
            conn.write([update(INSERT, entry), update(INSERT, other), update(INSERT, entry), update(INSERT, const),
                        update(INSERT, clone)])
    assert str(exc.value).splitlines() == [
        f"switch at {server.addr} rejected 3 of 5 updates of a write batch:",
        "  update 2: ALREADY_EXISTS: table l2_forward already holds an entry for {'dst_addr': 2199023255553}",
        "  update 3: PERMISSION_DENIED: table dt_chunk is const",
        "  update 4: UNIMPLEMENTED: clone_session_entry is not supported by the software switch",
    ]
    assert exc.value.failures[0] == (2, "ALREADY_EXISTS",
                                     "table l2_forward already holds an entry for {'dst_addr': 2199023255553}")
    # CONTINUE_ON_ERROR: the good updates took effect
    assert len(model.read("l2_forward")) == 2


def test_failed_setup_is_rolled_back(builds, pushed, monkeypatch):
    """Another controller wrote a worker's MAC between our read and our write: nothing of ours stays."""
    model, server = pushed
    b = load_build(builds[64])
    job = load_job(EXAMPLES / "job1.toml", b.plan)
    with server.lock:
        model.insert("l2_forward", {"dst_addr": "02:00:00:00:00:03"}, "l2_unicast", {"port": 3})
    real_state = Controller.state

    def stale_state(self):
        st = real_state(self)
        return SwitchView(st.jobs, st.result_dst, {}, st.groups)

    monkeypatch.setattr(Controller, "state", stale_state)
    with connect(server.addr) as conn:
        with pytest.raises(WriteError) as exc:
            Controller(b, conn).setup(job)
    assert str(exc.value).splitlines()[1:] == [
        "  update 11: ALREADY_EXISTS: table l2_forward already holds an entry for {'dst_addr': 2199023255555}"]
    assert model.dump_config() == {"tables": {"workers": [], "result_dst": [], "l2_forward": [
        {"match": {"dst_addr": 0x020000000003}, "action": "l2_unicast", "params": {"port": 3}}]}, "groups": {}}


def test_unsupported_read(pushed):
    model, server = pushed
    ent = p4runtime_pb2.Entity()
    ent.meter_entry.meter_id = 1
    with connect(server.addr) as conn:
        with pytest.raises(SwitchError) as exc:
            conn.read([ent])
    assert str(exc.value) == (f"switch at {server.addr}: Read failed: UNIMPLEMENTED: meter_entry is not supported by "
                              f"the software switch")


# ---------------------------------------------------------------- job files
CASES = json.loads((BAD / "expected.json").read_text())


def test_every_bad_job_file_has_a_message():
    assert sorted(CASES) == sorted(p.name for p in BAD.glob("*.toml"))


@pytest.mark.parametrize("name", sorted(CASES))
def test_bad_job_files(builds, name):
    with pytest.raises(JobFileError) as exc:
        load_job(BAD / name, load_build(builds[64]).plan)
    assert str(exc.value) == CASES[name]


def test_bad_job_file_cli_writes_nothing(builds, capsys):
    # validation happens before connecting: the address is never dialled
    rc = ctl_main(["ctl", "setup", str(builds[64]), str(BAD / "duplicate_id.toml"), "--addr", "127.0.0.1:1"])
    assert rc == 1
    assert capsys.readouterr().err == f"p4gen: error: {CASES['duplicate_id.toml']}\n"


def test_missing_job_file(builds):
    with pytest.raises(JobFileError) as exc:
        load_job(BAD / "absent.toml", load_build(builds[64]).plan)
    assert str(exc.value) == f"job file {str(BAD / 'absent.toml')!r} does not exist"


# ---------------------------------------------------------------- conflicts with jobs on the switch
def write_job(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(text)
    return p


def test_overlapping_jobs_are_rejected(builds, pushed, tmp_path):
    model, server = pushed
    b = load_build(builds[64])
    job1 = load_job(EXAMPLES / "job1.toml", b.plan)
    text2 = (EXAMPLES / "job2.toml").read_text().replace("slot_base = 32", "slot_base = 16")
    job2 = load_job(write_job(tmp_path, "overlap.toml", text2), b.plan)
    with connect(server.addr) as conn:
        ctl = Controller(b, conn)
        ctl.setup(job1)
        before = model.dump_config()
        with pytest.raises(JobConflictError) as exc:
            ctl.setup(job2)
        assert str(exc.value) == (f"overlap.toml: job 2 slots 16..47 overlap job 1 slots 0..31 on the switch at "
                                  f"{server.addr}")
        with pytest.raises(JobConflictError) as exc:
            ctl.setup(job1)
        assert str(exc.value) == f"job 1 is already set up on the switch at {server.addr}; tear it down first"
        same_mgid = load_job(write_job(tmp_path, "mgid.toml", (EXAMPLES / "job2.toml").read_text()
                                       .replace("mgid = 2", "mgid = 1")), b.plan)
        with pytest.raises(JobConflictError) as exc:
            ctl.setup(same_mgid)
        assert str(exc.value) == f"mgid.toml: mgid=1 is the multicast group of job 1 on the switch at {server.addr}"
        assert model.dump_config() == before
        with pytest.raises(JobConflictError) as exc:
            ctl.teardown(3)
        assert str(exc.value) == f"job 3 is not set up on the switch at {server.addr} (jobs there: 1)"


def test_workers_table_capacity(builds, pushed, tmp_path):
    """The plan sizes the workers table for jobs * max_workers entries; a job beyond that is refused."""
    model, server = pushed
    b = load_build(builds[64])
    def job_text(job, base, count, n, port0):
        head = f"job = {job}\nmgid = {job}\nslot_base = {base}\nslot_count = {count}\n"
        return head + "".join(f'\n[[workers]]\nid = {i}\nport = {port0 + i}\nmac = "02:00:00:00:{job:02x}:{i:02x}"\n'
                              f'ip = "10.{job}.0.{i + 1}"\nudp_port = 48864\n' for i in range(n))
    big = load_job(write_job(tmp_path, "big.toml", job_text(1, 0, 32, 30, 1)), b.plan)
    small = load_job(write_job(tmp_path, "small.toml", job_text(2, 32, 32, 3, 100)), b.plan)
    with connect(server.addr) as conn:
        ctl = Controller(b, conn)
        ctl.setup(big)
        with pytest.raises(JobConflictError) as exc:
            ctl.setup(small)
    assert str(exc.value) == (f"small.toml: job 2 needs 3 workers entries; the switch at {server.addr} holds 30 of "
                              f"the plan's 32")


def test_main_cli_runs_ctl(builds, capsys):
    from p4gen.cli import main
    addr = f"127.0.0.1:{free_port()}"
    assert main(["ctl", "reset", str(builds[64]), "--addr", addr, "--timeout", "0.2"]) == 1
    assert capsys.readouterr().err == f"p4gen: error: switch at {addr} did not answer within 0.2 s\n"


def test_an_answer_with_a_field_or_parameter_id_the_plan_lacks_is_one_line():
    """The controller finds a match field and an action parameter by its P4Runtime ID's own name
    (p4gen/p4runtime/ids.py): an ID the plan's table or action lacks (0, or past the last) is one line,
    never another field (ID 0 used to decode as the last key)."""
    from p4.v1 import p4runtime_pb2

    from p4gen.controller.entities import PlanEntities
    from p4gen.controller.errors import ControllerError
    from p4gen.planner import make_plan
    from p4gen.spec import make_spec
    from p4gen.target import load_target

    e = PlanEntities(make_plan(make_spec(slots=8), load_target("bmv2")))
    ent = e.table_entry("l2_forward", {"dst_addr": 0x020000000001}, "l2_unicast", {"port": 3})
    assert e.decode_table_entry(ent.table_entry).args == {"port": 3}
    for fid, pid, what in ((0, 1, "match field id 0, which table l2_forward"),
                           (1, 2, "parameter id 2, which action l2_unicast")):
        bad = p4runtime_pb2.TableEntry()
        bad.CopyFrom(ent.table_entry)
        bad.match[0].field_id = fid
        bad.action.action.params[0].param_id = pid
        with pytest.raises(ControllerError) as err:
            e.decode_table_entry(bad)
        assert str(err.value) == f"the switch answered with {what} does not have (its P4Info is not this plan's)"
