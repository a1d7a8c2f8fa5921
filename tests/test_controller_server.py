"""The software switch's P4Runtime server: reads, register and counter writes, standalone run,
and the register-reset path a BMv2 build takes (simple_switch_CLI, faked here)."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest
from p4.v1 import p4runtime_pb2

from p4gen.build import build
from p4gen.controller import Controller, ControllerError, WriteError, connect, load_build
from p4gen.p4runtime import codec
from p4gen.controller.entities import PlanEntities, update
from p4gen.switch.model import SwitchModel
from p4gen.switch.p4rt_server import P4RuntimeServer
from p4gen.spec import make_spec
from p4gen.target import load_target

MODIFY = p4runtime_pb2.Update.MODIFY


@pytest.fixture(scope="module")
def build_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("srv") / "bmv2-64"
    build(make_spec(slots=64, elements_per_packet=16), load_target("bmv2"), out, use_cache=False)
    return out


@pytest.fixture
def pushed(build_dir):
    before = set(threading.enumerate())
    model = SwitchModel(load_build(build_dir).plan)
    with P4RuntimeServer(model) as server:
        with connect(server.addr) as conn:
            Controller(load_build(build_dir), conn).push()
            yield model, server, conn
    leftover = [t for t in threading.enumerate() if t not in before and t.is_alive()]
    assert not leftover, f"threads left behind: {leftover}"


def test_const_tables_and_defaults_read_back(build_dir, pushed):
    model, server, conn = pushed
    plan = load_build(build_dir).plan
    e = PlanEntities(plan)
    got = conn.read([e.table_wildcard("dt_counter")])
    want = plan.table("dt_counter").entries
    assert [e.decode_table_entry(x.table_entry).args for x in got] == [w.args for w in want]
    assert all(x.table_entry.is_const for x in got)
    ent = e.table_wildcard("workers")
    ent.table_entry.is_default_action = True
    (d,) = conn.read([ent])
    assert e.decode_table_entry(d.table_entry).action == "drop_unknown" and d.table_entry.is_default_action


def test_register_write_and_read_one_index(build_dir, pushed):
    model, server, conn = pushed
    plan = load_build(build_dir).plan
    reg = next(r for r in plan.registers if r.role == "values")
    ent = p4runtime_pb2.Entity()
    ent.register_entry.register_id = reg.id
    ent.register_entry.index.index = 5
    ent.register_entry.data.bitstring = codec.encode((7 << 32) | 3, 64)       # lane 1 = 7, lane 0 = 3
    conn.write([update(MODIFY, ent)])
    np.testing.assert_array_equal(model.register_read(reg.name)[5], [3, 7])
    q = p4runtime_pb2.Entity()
    q.register_entry.register_id = reg.id
    q.register_entry.index.index = 5
    (got,) = conn.read([q])
    assert codec.decode(got.register_entry.data.bitstring, 64) == (7 << 32) | 3
    ent.register_entry.index.index = reg.entries
    with pytest.raises(WriteError) as exc:
        conn.write([update(MODIFY, ent)])
    assert exc.value.failures == [(0, "INVALID_ARGUMENT", f"register {reg.name} index {reg.entries} outside "
                                                          f"0..{reg.entries - 1}")]


def test_counter_reset_by_write(build_dir, pushed):
    model, server, conn = pushed
    e = PlanEntities(load_build(build_dir).plan)
    with server.lock:
        model.process(b"\x00" * 10, 1)            # a runt: drop_malformed
    assert Controller(load_build(build_dir), conn).counters()["drop_malformed"] == (1, 10)
    conn.write([update(MODIFY, e.counter_wildcard("stats"))])
    assert model.counter_read()["drop_malformed"] == (0, 0)
    one = e.counter_wildcard("stats")
    one.counter_entry.index.index = 3
    with pytest.raises(WriteError) as exc:
        conn.write([update(MODIFY, one)])
    assert exc.value.failures == [(0, "UNIMPLEMENTED", "the software switch only resets counter stats as a whole "
                                                       "(index unset, zero data)")]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_standalone_server(build_dir):
    addr = f"127.0.0.1:{free_port()}"
    proc = subprocess.Popen([sys.executable, "-m", "p4gen.switch.p4rt_server", "--plan", str(build_dir), "--addr", addr],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        assert line == f"P4Runtime server for device 0 listening on {addr}\n", proc.stderr.read()
        with connect(addr) as conn:
            ctl = Controller(load_build(build_dir), conn)
            ctl.push()
            assert ctl.counters()["absorbed"] == (0, 0)
    finally:
        proc.terminate()
        assert proc.wait(10) == 0


def fake_cli(tmp_path, monkeypatch, body: str) -> Path:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    script = bindir / "simple_switch_CLI"
    script.write_text(f"#!/bin/sh\n{body}\n")
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
    return tmp_path / "commands.txt"


@pytest.fixture
def bmv2_build(build_dir, tmp_path):
    """The same build with a (placeholder) BMv2 JSON: the controller takes it for a BMv2 switch."""
    out = tmp_path / "with-json"
    shutil.copytree(build_dir, out)
    (out / "program.json").write_text('{"pipelines": []}\n')
    return out


def test_bmv2_register_reset_goes_through_thrift_cli(bmv2_build, tmp_path, monkeypatch):
    log = fake_cli(tmp_path, monkeypatch, f'echo "$@" > {tmp_path}/args.txt; cat > {tmp_path}/commands.txt')
    b = load_build(bmv2_build)
    model = SwitchModel(b.plan)
    with P4RuntimeServer(model) as server, connect(server.addr) as conn:
        ctl = Controller(b, conn)
        ctl.push()
        how = ctl.reset_registers(thrift_port=9191)
    names = [r.name for r in b.plan.registers]
    assert how == f"simple_switch_CLI register_reset on Thrift port 9191 ({len(names)} registers)"
    assert (tmp_path / "args.txt").read_text() == "--thrift-ip 127.0.0.1 --thrift-port 9191\n"   # the switch's host
    assert log.read_text().splitlines() == [f"register_reset P4genIngress.{n}" for n in names]


def test_bmv2_register_reset_reports_cli_errors(bmv2_build, tmp_path, monkeypatch):
    fake_cli(tmp_path, monkeypatch, 'cat > /dev/null; echo "Error: Invalid register name (P4genIngress.chunk)"')
    b = load_build(bmv2_build)
    with P4RuntimeServer(SwitchModel(b.plan)) as server, connect(server.addr) as conn:
        ctl = Controller(b, conn)
        ctl.push()
        with pytest.raises(ControllerError) as exc:
            ctl.reset_registers(thrift_port=9191)
    assert str(exc.value) == ("simple_switch_CLI --thrift-ip 127.0.0.1 --thrift-port 9191 failed to write registers: "
                              "Error: Invalid register name (P4genIngress.chunk)")


def test_bmv2_register_reset_without_cli(bmv2_build, tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    b = load_build(bmv2_build)
    with P4RuntimeServer(SwitchModel(b.plan)) as server, connect(server.addr) as conn:
        ctl = Controller(b, conn)
        ctl.push()
        with pytest.raises(ControllerError) as exc:
            ctl.reset_registers()
    assert str(exc.value) == (f"switch at {server.addr} cannot reset registers over P4Runtime (BMv2: PI issue #376) "
                              f"and simple_switch_CLI is not on PATH; run `simple_switch_CLI --thrift-port 9090` "
                              f"with register_reset for each register, or restart the switch")
