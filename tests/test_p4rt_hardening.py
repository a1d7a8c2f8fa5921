"""The P4Runtime server under hostile clients, and the controller's rollback however a batch fails."""

from __future__ import annotations

import threading
import time

import grpc
import pytest
from google.rpc import code_pb2, status_pb2
from p4.v1 import p4runtime_pb2, p4runtime_pb2_grpc

from p4gen.build import build
from p4gen.controller import Controller, SwitchUnreachableError, WriteError, connect, load_build
from p4gen.controller.entities import PlanEntities, update
from p4gen.controller.errors import STATUS_DETAILS_KEY
from p4gen.jobfile import parse_job
from p4gen.switch.model import SwitchModel
from p4gen.switch.p4rt_server import INDEX_SPACE, MAX_DETAILS, P4RuntimeServer
from p4gen.spec import make_spec
from p4gen.target import load_target

INSERT, MODIFY, DELETE = p4runtime_pb2.Update.INSERT, p4runtime_pb2.Update.MODIFY, p4runtime_pb2.Update.DELETE
SET = p4runtime_pb2.SetForwardingPipelineConfigRequest
# Controller calls here move a thousand entries, and a failed batch's rollback reads the tables back
# twice: at a load of 16 on two cores one such call took longer than the controller's 5 s default and
# the rollback gave up (as it must when a switch does not answer).  These tests are about what the
# switch holds afterwards, not about its speed, so their connections wait longer.
SLOW_SWITCH_TIMEOUT = 60.0


@pytest.fixture(scope="module")
def builds(tmp_path_factory):
    root = tmp_path_factory.mktemp("p4rt-hard")
    out = {"small": root / "small", "wide": root / "wide"}
    build(make_spec(slots=64, elements_per_packet=16), load_target("bmv2"), out["small"], use_cache=False)
    build(make_spec(slots=256, max_workers=128, elements_per_packet=16), load_target("bmv2"), out["wide"], use_cache=False)
    return out


@pytest.fixture
def pushed(builds):
    before = set(threading.enumerate())
    b = load_build(builds["small"])
    model = SwitchModel(b.plan)
    with P4RuntimeServer(model, arbitration_wait=5.0) as server:
        with connect(server.addr, election_id=10, timeout=SLOW_SWITCH_TIMEOUT) as conn:
            Controller(b, conn).push()
            yield model, server, conn, b
    time.sleep(0.1)
    leftover = [t for t in threading.enumerate() if t not in before and t.is_alive()]
    assert not leftover, f"threads left behind: {leftover}"


def _stub(addr):
    ch = grpc.insecure_channel(addr)
    return ch, p4runtime_pb2_grpc.P4RuntimeStub(ch)


def _l2(e, i, port=1):
    return e.table_entry("l2_forward", {"dst_addr": 0x020000100000 + i}, "l2_unicast", {"port": port})


def _write_request(conn, updates):
    req = p4runtime_pb2.WriteRequest(device_id=0)
    req.election_id.low = conn.election_id
    req.updates.extend(updates)
    return req


def _rpc_error(fn, *args, **kw) -> grpc.RpcError:
    with pytest.raises(grpc.RpcError) as exc:
        fn(*args, **kw)
    return exc.value


# ---------------------------------------------------------------- idle streams
def test_64_idle_streams_neither_stall_capabilities_nor_the_primarys_write(pushed):
    model, server, conn, b = pushed
    stop = threading.Event()

    def idle():                        # a client that opens a stream and never says anything
        stop.wait()
        return
        yield

    opened = []
    try:
        for _ in range(64):
            ch, stub = _stub(server.addr)
            opened.append((ch, stub.StreamChannel(idle())))
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and sum(call.done() for _ch, call in opened) < 64 - 7:
            time.sleep(0.02)
        refused = [call for _ch, call in opened if call.done()]
        assert len(refused) == 64 - 7          # 8 streams at most: the primary's and 7 idle ones
        assert {c.code() for c in refused} == {grpc.StatusCode.RESOURCE_EXHAUSTED}
        assert "at most 8 StreamChannels" in refused[0].details()
        ch, stub = _stub(server.addr)
        with ch:
            t0 = time.monotonic()
            resp = stub.Capabilities(p4runtime_pb2.CapabilitiesRequest(), timeout=1.0)
            assert resp.p4runtime_api_version == "1.4.1" and time.monotonic() - t0 < 1.0
        t0 = time.monotonic()
        conn.timeout = 1.0
        conn.write([update(INSERT, _l2(PlanEntities(b.plan), 1))])
        assert time.monotonic() - t0 < 1.0
        assert len(model.read("l2_forward")) == 1
    finally:
        stop.set()
        for ch, call in opened:
            call.cancel()
            ch.close()


def test_a_stream_that_never_arbitrates_is_closed(builds):
    model = SwitchModel(load_build(builds["small"]).plan)
    stop = threading.Event()

    def idle():
        stop.wait()
        return
        yield

    with P4RuntimeServer(model, arbitration_wait=0.5) as server:
        ch, stub = _stub(server.addr)
        call = stub.StreamChannel(idle())
        try:
            err = _rpc_error(lambda: next(call))
            assert err.code() == grpc.StatusCode.DEADLINE_EXCEEDED
            assert err.details() == "no arbitration within 0.5 s; the stream is closed"
        finally:
            stop.set()
            ch.close()


def test_streams_of_garbage_are_refused_and_the_server_still_stops(builds):
    """20 StreamChannels whose messages are not StreamMessageRequests: each is closed with one line, a
    controller still arbitrates, and the server stops at once.  Before, gRPC's own failure to parse
    them left their calls behind and ``stop()`` waited for them forever."""
    model = SwitchModel(load_build(builds["small"]).plan)
    server = P4RuntimeServer(model).start()
    stopped = threading.Event()
    try:
        ch = grpc.insecure_channel(server.addr)
        raw = ch.stream_stream("/p4.v1.P4Runtime/StreamChannel", request_serializer=lambda b: b,
                               response_deserializer=lambda b: b)
        calls = [raw(iter([b"\xff\xff\xff\xff garbage", b"\x0a\x05abc"]), timeout=20) for _ in range(20)]
        for call in calls:
            err = _rpc_error(lambda: list(call))
            assert err.code() == grpc.StatusCode.INVALID_ARGUMENT, err
            assert err.details() == "a StreamChannel message of 12 bytes is not a StreamMessageRequest; the stream " \
                                    "is closed"
        with connect(server.addr, election_id=3, timeout=10):
            pass
        ch.close()
    finally:
        t0 = time.monotonic()
        threading.Thread(target=lambda: (server.stop(), stopped.set()), daemon=True).start()
        assert stopped.wait(15), "the server did not stop within 15 s"
    assert time.monotonic() - t0 < 5


def test_a_write_of_garbage_is_invalid_and_a_write_is_read_update_by_update(pushed):
    """The server takes a WriteRequest's updates as bytes and parses one at a time (p4rt_common.split_write):
    garbage is INVALID_ARGUMENT with one line, an update that is not an Update fails alone."""
    from p4gen.switch.p4rt_common import Fail, split_write

    model, server, conn, b = pushed
    e = PlanEntities(b.plan)
    req = _write_request(conn, [update(INSERT, _l2(e, i)) for i in range(3)])
    req.atomicity = p4runtime_pb2.WriteRequest.CONTINUE_ON_ERROR
    head, ups = split_write(req.SerializeToString())
    assert (head.device_id, head.election_id, len(head.updates)) == (req.device_id, req.election_id, 0)
    assert [p4runtime_pb2.Update.FromString(u) for u in ups] == list(req.updates)
    with pytest.raises(Fail) as err:
        split_write(b"\x22\xff\xff")
    assert err.value.message == "the WriteRequest (3 bytes) is not valid protobuf: a varint runs past the message"
    ch = grpc.insecure_channel(server.addr)
    raw = ch.unary_unary("/p4.v1.P4Runtime/Write", request_serializer=lambda x: x, response_deserializer=lambda x: x)
    exc = _rpc_error(raw, b"\x0f\x00", timeout=5)
    assert exc.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert exc.details() == "the WriteRequest (2 bytes) is not valid protobuf: wire type 7 has no place in a WriteRequest"
    bad = _write_request(conn, [update(INSERT, _l2(e, 7))]).SerializeToString() + b"\x22\x02\xff\xff"
    exc = _rpc_error(raw, bad, timeout=5)
    assert exc.code() == grpc.StatusCode.UNKNOWN and exc.details() == "1 of 2 updates failed"
    assert model.state.holds("l2_forward", {"dst_addr": 0x020000100007})
    ch.close()


# ---------------------------------------------------------------- invalid requests
def test_update_type_99_is_invalid_and_deletes_nothing(pushed):
    model, server, conn, b = pushed
    e = PlanEntities(b.plan)
    conn.write([update(INSERT, _l2(e, 1))])
    bad = update(INSERT, _l2(e, 1))
    bad.type = 99
    ch, stub = _stub(server.addr)
    with ch:
        err = _rpc_error(stub.Write, _write_request(conn, [bad]), timeout=5)
    st = status_pb2.Status.FromString(dict(err.trailing_metadata())[STATUS_DETAILS_KEY])
    one = p4runtime_pb2.Error()
    st.details[0].Unpack(one)
    assert (one.canonical_code, one.message) == (code_pb2.INVALID_ARGUMENT,
                                                 "update type 99 is not one of INSERT, MODIFY, DELETE")
    assert len(model.read("l2_forward")) == 1


@pytest.mark.parametrize("field,value,message", [
    ("action", 77, "pipeline config action 77 is not one of VERIFY, VERIFY_AND_SAVE, VERIFY_AND_COMMIT, COMMIT, "
                   "RECONCILE_AND_COMMIT"),
    ("device_config", b"this is not BMv2 JSON", "the device config (21 bytes) is neither empty nor BMv2 JSON"),
])
def test_invalid_pipeline_requests(pushed, field, value, message):
    model, server, conn, b = pushed
    conn.write([update(INSERT, _l2(PlanEntities(b.plan), 1))])
    req = SET(device_id=0, action=SET.VERIFY_AND_COMMIT)
    req.election_id.low = conn.election_id
    req.config.p4info.CopyFrom(b.p4info)
    if field == "action":
        req.action = value
    else:
        req.config.p4_device_config = value
    ch, stub = _stub(server.addr)
    with ch:
        err = _rpc_error(stub.SetForwardingPipelineConfig, req, timeout=5)
    assert (err.code(), err.details()) == (grpc.StatusCode.INVALID_ARGUMENT, message)
    assert len(model.read("l2_forward")) == 1          # nothing was committed (a commit clears the tables)


def _read(server, ent):
    ch, stub = _stub(server.addr)
    with ch:
        return [r for resp in stub.Read(p4runtime_pb2.ReadRequest(device_id=0, entities=[ent]), timeout=5)
                for r in resp.entities]


def test_out_of_range_indices_unknown_ids_and_wide_values_are_invalid(pushed):
    model, server, conn, b = pushed
    cnt = b.plan.counters[0]
    ent = p4runtime_pb2.Entity()
    ent.counter_entry.counter_id = cnt.id
    ent.counter_entry.index.index = 2 ** 63 - 1
    err = _rpc_error(_read, server, ent)
    assert (err.code(), err.details()) == (grpc.StatusCode.INVALID_ARGUMENT,
                                           f"counter stats index {2 ** 63 - 1} outside 0..{len(cnt.indices) - 1}")
    reg = b.plan.registers[0]
    ent = p4runtime_pb2.Entity()
    ent.register_entry.register_id = reg.id
    ent.register_entry.index.index = 2 ** 63 - 1
    err = _rpc_error(_read, server, ent)
    assert err.code() == grpc.StatusCode.INVALID_ARGUMENT and "outside 0.." in err.details()
    for kind in ("table_entry", "counter_entry", "register_entry"):
        ent = p4runtime_pb2.Entity()
        getattr(ent, kind).SetInParent()
        setattr(getattr(ent, kind), kind.replace("_entry", "_id"), 0x7777)
        err = _rpc_error(_read, server, ent)
        assert err.code() == grpc.StatusCode.INVALID_ARGUMENT and "unknown" in err.details()
    e = PlanEntities(b.plan)
    wide = _l2(e, 1)
    wide.table_entry.match[0].exact.value = b"\x01" * 7          # a 48-bit key given 56 bits
    with pytest.raises(WriteError) as exc:
        conn.write([update(INSERT, wide)])
    assert exc.value.failures == [(0, "INVALID_ARGUMENT", "table l2_forward key dst_addr: 0x01010101010101 does "
                                                          "not fit in 48 bits")]
    assert model.read("l2_forward") == []


@pytest.mark.slow
def test_error_details_list_only_failed_updates_and_stay_small(pushed):
    model, server, conn, b = pushed
    e = PlanEntities(b.plan)
    ups = [update(INSERT, _l2(e, i)) for i in range(999)] + [update(INSERT, _l2(e, 5))]
    ch, stub = _stub(server.addr)
    with ch:
        err = _rpc_error(stub.Write, _write_request(conn, ups), timeout=10)
        trailer = dict(err.trailing_metadata())[STATUS_DETAILS_KEY]
        st = status_pb2.Status.FromString(trailer)
        assert st.message == "1 of 1000 updates failed" and len(st.details) == 1 and len(trailer) < 512
        one = p4runtime_pb2.Error()
        st.details[0].Unpack(one)
        assert (one.space, one.code, one.canonical_code) == (INDEX_SPACE, 999, code_pb2.ALREADY_EXISTS)
        all_bad = [update(INSERT, _l2(e, i % 999)) for i in range(1000)]      # every one exists now
        err = _rpc_error(stub.Write, _write_request(conn, all_bad), timeout=10)
        trailer = dict(err.trailing_metadata())[STATUS_DETAILS_KEY]
        st = status_pb2.Status.FromString(trailer)
        assert st.message == f"1000 of 1000 updates failed; the first {MAX_DETAILS} are listed"
        assert len(st.details) == MAX_DETAILS and len(trailer) < 8192
    with pytest.raises(WriteError) as exc:
        conn.write(all_bad)
    assert str(exc.value).splitlines()[0] == (f"switch at {server.addr} rejected 1000 of 1000 updates of a write "
                                              f"batch (the first {MAX_DETAILS} listed):")


# ---------------------------------------------------------------- rollback
def _state(model):
    return model.dump_config(), {r: model.register_read(r).tolist() for r in model.register_names()}


@pytest.mark.slow
def test_a_1000_update_batch_that_fails_at_the_end_leaves_the_switch_unchanged(pushed):
    model, server, conn, b = pushed
    e = PlanEntities(b.plan)
    with server.lock:
        model.insert("l2_forward", {"dst_addr": 0x020000100000 + 999}, "l2_unicast", {"port": 9})
    before = _state(model)
    ups = [(INSERT, _l2(e, i), None) for i in range(999)] + [(INSERT, _l2(e, 999, port=1), None)]
    with pytest.raises(WriteError) as exc:
        Controller(b, conn)._write(ups)
    assert exc.value.failures[0][:2] == (999, "ALREADY_EXISTS")
    assert "rollback" not in str(exc.value), str(exc.value).splitlines()[-1]
    assert _state(model) == before


class _LostAnswer:
    """A connection whose Write reaches the switch but whose answer is lost (a deadline, a broken link)."""

    def __init__(self, conn):
        self.conn, self.addr = conn, conn.addr

    def write(self, updates):
        self.conn.write(list(updates))
        raise SwitchUnreachableError(f"switch at {self.addr} did not answer Write within 5 s")

    def __getattr__(self, name):
        return getattr(self.conn, name)


def test_a_batch_whose_answer_is_lost_is_rolled_back(pushed):
    model, server, conn, b = pushed
    before = _state(model)
    job = parse_job({"job": 2, "workers": [{"id": i, "port": i + 1, "mac": f"02:00:00:00:00:0{i + 1}",
                                            "ip": f"10.0.0.{i + 1}", "udp_port": 48864} for i in range(3)]},
                    b.plan, source="job2")
    real = conn.write
    calls = []

    def lossy(updates):
        updates = list(updates.updates if isinstance(updates, p4runtime_pb2.WriteRequest) else updates)
        if all(u.entity.WhichOneof("entity") == "register_entry" for u in updates):
            return real(updates)                  # the job's slots zeroed first: answered
        calls.append(1)
        if len(calls) == 1:
            real(updates)
            raise SwitchUnreachableError(f"switch at {conn.addr} did not answer Write within 5 s")
        return real(updates)

    conn.write = lossy
    try:
        with pytest.raises(SwitchUnreachableError, match="did not answer Write"):
            Controller(b, conn).setup(job)
    finally:
        conn.write = real
    assert len(calls) == 2                    # the batch, then its undo
    assert _state(model) == before


@pytest.mark.slow
def test_a_100_worker_job_that_overflows_l2_forward_is_rolled_back_then_fits(builds):
    """Beside 1,000 other entries the job's 100 l2_forward inserts overflow the table (1,024): about 75
    updates of a 401-update batch fail.  Their error list once passed the client's metadata limit, so the
    client saw RESOURCE_EXHAUSTED and the job stayed half installed; now it is rolled back.  With 100
    entries fewer the same job is set up."""
    b = load_build(builds["wide"])
    model = SwitchModel(b.plan)
    with P4RuntimeServer(model) as server:
        with connect(server.addr, timeout=SLOW_SWITCH_TIMEOUT) as conn:
            ctl = Controller(b, conn)
            ctl.push()
            with server.lock:
                for i in range(1000):
                    model.insert("l2_forward", {"dst_addr": 0x020000200000 + i}, "l2_unicast", {"port": 200})
            workers = [{"id": i, "port": 1 + i, "mac": f"02:00:00:01:{i >> 8:02x}:{i & 255:02x}",
                        "ip": f"10.1.{i >> 8}.{i & 255}", "udp_port": 48864} for i in range(100)]
            job = parse_job({"job": 1, "slot_count": 128, "workers": workers}, b.plan, source="big")
            before = _state(model)
            with pytest.raises(WriteError) as exc:
                ctl.setup(job)
            lines = str(exc.value).splitlines()
            assert lines[0] == (f"switch at {server.addr} rejected 76 of 401 updates of a write batch "
                                f"(the first {MAX_DETAILS} listed):")
            assert lines[1].endswith("RESOURCE_EXHAUSTED: table l2_forward is full (1024 entries)")
            assert "rollback" not in str(exc.value), lines[-1]
            assert _state(model) == before
            with server.lock:
                for i in range(100):
                    model.delete("l2_forward", {"dst_addr": 0x020000200000 + i})
            ch = ctl.setup(job)
            assert (ch.workers, ch.updates) == (100, 401)
            assert len(model.read("workers")) == 100 and len(model.read("l2_forward")) == 1000


# ---------------------------------------------------------------- reads and writes in bounded pieces
def test_a_read_returns_every_entity_in_pieces_with_the_values_the_model_holds(pushed):
    model, server, conn, b = pushed
    e = PlanEntities(b.plan)
    regs = b.plan.registers
    model.register_write(regs[-1].name, 5, [7, 9])                 # a value register: lanes 7 (low) and 9
    model.register_write("chunk", 3, [123456])
    stub_ch, stub = _stub(server.addr)
    try:
        wild = p4runtime_pb2.Entity()
        wild.register_entry.register_id = 0
        pieces = list(stub.Read(p4runtime_pb2.ReadRequest(device_id=0, entities=[wild]), timeout=60))
    finally:
        stub_ch.close()
    ents = [x for p in pieces for x in p.entities]
    assert len(ents) == sum(r.entries for r in regs) and len(pieces) > len(regs) // 2
    assert max(len(p.entities) for p in pieces) <= 1000
    got = {(x.register_entry.register_id, x.register_entry.index.index): int.from_bytes(x.register_entry.data.bitstring,
                                                                                         "big") for x in ents}
    assert got[(regs[-1].id, 5)] == 7 | 9 << regs[-1].lane_bits and got[(regs[0].id, 3)] == 123456
    assert sum(1 for v in got.values() if v) == 2
    assert conn.read([e.table_wildcard("l2_forward")]) == []          # small reads answer as before


def test_a_read_selecting_too_many_entities_is_refused_with_one_line(tmp_path):
    from p4gen.switch.p4rt_server import MAX_READ_ENTITIES

    out = tmp_path / "big"
    build(make_spec(slots=4096, elements_per_packet=64, max_workers=2), load_target("bmv2"), out, use_cache=False)
    b = load_build(out)
    total = sum(r.entries for r in b.plan.registers)
    assert total > MAX_READ_ENTITIES
    with P4RuntimeServer(SwitchModel(b.plan), pipeline_set=True) as server:
        ch, stub = _stub(server.addr)
        try:
            wild = p4runtime_pb2.Entity()
            wild.register_entry.register_id = 0
            err = _rpc_error(lambda: list(stub.Read(p4runtime_pb2.ReadRequest(device_id=0, entities=[wild]), timeout=30)))
            one = p4runtime_pb2.Entity()
            one.register_entry.register_id = b.plan.registers[0].id
            alone = [x for r in stub.Read(p4runtime_pb2.ReadRequest(device_id=0, entities=[one]), timeout=30)
                     for x in r.entities]
        finally:
            ch.close()
    assert err.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert err.details() == (f"this Read selects {total} entities; a Read may select at most {MAX_READ_ENTITIES} "
                             f"(read the registers one by one, or by index)")
    assert len(alone) == b.plan.registers[0].entries


def test_requests_past_their_deadline_are_dropped_and_the_busy_server_refuses_the_rest(pushed, monkeypatch):
    """MAX_ACTIVE Reads held open: a Write whose deadline passes while it waits is never executed, not even
    once the Reads finish; with a long deadline it is refused as busy after ADMIT_WAIT."""
    from p4gen.switch import p4rt_server

    model, server, conn, b = pushed
    release, entered = threading.Event(), threading.Semaphore(0)
    real = server.servicer.store.read

    def slow(ent, lock, piece, encode=None):
        entered.release()
        release.wait(30)
        yield from real(ent, lock, piece, encode)

    monkeypatch.setattr(server.servicer.store, "read", slow)
    e = PlanEntities(b.plan)
    readers = []
    for _ in range(p4rt_server.MAX_ACTIVE):
        ch, stub = _stub(server.addr)
        req = p4runtime_pb2.ReadRequest(device_id=0, entities=[e.table_wildcard("l2_forward")])
        t = threading.Thread(target=lambda s=stub, r=req: list(s.Read(r, timeout=60)))
        t.start()
        readers.append((ch, t))
    for _ in range(p4rt_server.MAX_ACTIVE):
        assert entered.acquire(timeout=10)
    ch, stub = _stub(server.addr)
    try:
        t0 = time.monotonic()
        late = _rpc_error(stub.Write, _write_request(conn, [update(INSERT, _l2(e, 1))]), timeout=0.5)
        waited = time.monotonic() - t0
        busy = _rpc_error(stub.Write, _write_request(conn, [update(INSERT, _l2(e, 2))]), timeout=30)
    finally:
        release.set()
        for c, t in readers:
            t.join(30)
            c.close()
    time.sleep(0.5)                                  # what the server would still do with a backlog
    assert late.code() == grpc.StatusCode.DEADLINE_EXCEEDED and waited < 2
    assert busy.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert busy.details().startswith(f"Write: this switch executes at most {p4rt_server.MAX_ACTIVE} requests at once")
    assert model.read("l2_forward") == []            # neither write ever ran
    conn.write([update(INSERT, _l2(e, 3))])           # and the server serves again
    assert len(model.read("l2_forward")) == 1
    ch.close()
