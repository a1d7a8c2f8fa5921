"""The switch model is composed of parts with explicit interfaces, not assembled from mixins.

``SwitchModel`` derives from nothing but ``object`` and builds its parts (state, decision program,
per-packet path, batch path and the batch path's helpers), each of which takes what it uses in its
constructor.  Read from the source with :mod:`ast`: a class of ``p4gen/switch`` uses only the private
attributes it defines itself (``self._x`` assigned in the class, or one of its own methods), never
another object's (``other._x``); the modules of the model import one way, in the order of
:data:`LAYERS`; and each stays under 600 lines.
"""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest

from p4gen.switch import batch, batch_emit, batch_values, batch_workers, decider, decision_loop, fields, interpreter
from p4gen.switch import model, state
from p4gen.switch.model import SwitchModel

SWITCH = Path(model.__file__).resolve().parent

# the model's modules, lowest first: each imports (from the package) only modules of earlier layers
LAYERS = [
    {"kernels", "job_config"},
    {"state"},
    {"fields", "decider"},
    {"decision_loop", "interpreter", "batch_workers", "batch_values", "batch_emit"},
    {"batch"},
    {"model"},
]

PARTS = [state.SwitchState, decider.DecisionProgram, decision_loop.DecisionLoop, fields.FrameFields,
         fields.FrameRecords, interpreter.PacketPath, batch.BatchPath, batch_workers.WorkerLookup,
         batch_values.BatchValues, batch_emit.BatchEmitter]


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _classes():
    for path in sorted(SWITCH.glob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                yield path.name, node


def _defined(cls: ast.ClassDef) -> set[str]:
    """The names a class defines: its methods and class attributes, and every ``self.x`` it assigns."""
    out = set()
    for item in cls.body:
        if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
            out.add(item.name)
        elif isinstance(item, ast.Assign):
            out.update(t.id for t in item.targets if isinstance(t, ast.Name))
        elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
            out.add(item.target.id)
    for node in ast.walk(cls):
        targets = []
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign)):
            targets = [node.target]
        for t in targets:
            for e in ast.walk(t):
                if (isinstance(e, ast.Attribute) and isinstance(e.value, ast.Name) and e.value.id == "self"
                        and isinstance(e.ctx, ast.Store)):
                    out.add(e.attr)
    return out


def test_switch_model_is_composed_not_inherited():
    assert SwitchModel.__bases__ == (object,)
    for part in PARTS + [SwitchModel]:
        assert part.__bases__ == (object,), part


def test_a_class_uses_only_the_private_attributes_it_defines():
    """No class of p4gen/switch reads ``self._x`` that another class defines (what a mixin does), and
    none reaches into another object's private attributes (``obj._x``)."""
    borrowed, reached = [], []
    for fname, cls in _classes():
        own = _defined(cls)
        for node in ast.walk(cls):
            if not (isinstance(node, ast.Attribute) and _private(node.attr)):
                continue
            if isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"):
                if node.attr not in own:
                    borrowed.append(f"{fname}:{node.lineno}: {cls.name} uses self.{node.attr}")
            else:
                reached.append(f"{fname}:{node.lineno}: {cls.name} reaches {ast.unparse(node)}")
    assert borrowed == []
    assert reached == []


def test_the_checker_finds_a_mixin_and_a_reach():
    src = ("class A:\n    def f(self):\n        return self._x\n"
           "class B:\n    def __init__(self, a):\n        self._a = a\n    def g(self):\n        return self._a._y\n")
    tree = ast.parse(src)
    a, b = [n for n in tree.body if isinstance(n, ast.ClassDef)]
    assert "_x" not in _defined(a)
    assert "_a" in _defined(b)
    assert any(isinstance(n, ast.Attribute) and n.attr == "_y" and not isinstance(n.value, ast.Name)
               for n in ast.walk(b))


@pytest.mark.parametrize("part", PARTS + [SwitchModel], ids=lambda c: c.__name__)
def test_each_part_documents_its_interface(part):
    """Every part says what it is, and each public method it offers says what it does (or is one of the
    control API's self-explanatory forwarders on the facade)."""
    assert (part.__doc__ or "").strip(), part
    mod = inspect.getmodule(part)
    assert (mod.__doc__ or "").strip(), mod
    undocumented = [name for name, fn in vars(part).items()
                    if inspect.isfunction(fn) and not name.startswith("_") and not (fn.__doc__ or "").strip()]
    if part is SwitchModel or part is state.SwitchState:
        # the P4Runtime-like control API: register_names, insert / modify / delete, size, read, ...
        undocumented = [n for n in undocumented if n not in CONTROL_API]
    assert undocumented == []


CONTROL_API = {"register_names", "register_write", "insert", "modify", "delete", "size", "read", "delete_group",
               "counter_reset", "counter_read", "dump_config"}


def _imports(path: Path) -> set[str]:
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            if node.module:
                out.add(node.module.split(".")[0])
            else:
                out.update(a.name for a in node.names)
    return out


def test_the_model_modules_import_one_way():
    layer = {m: i for i, mods in enumerate(LAYERS) for m in mods}
    wrong = []
    for mod, i in layer.items():
        for dep in _imports(SWITCH / f"{mod}.py"):
            if dep in layer and layer[dep] >= i:
                wrong.append(f"{mod} (layer {i}) imports {dep} (layer {layer[dep]})")
    assert wrong == []


def test_switch_modules_stay_under_600_lines():
    long = {p.name: n for p in SWITCH.glob("*.py") if (n := len(p.read_text().splitlines())) > 600}
    assert long == {}


def test_the_facade_forwards_to_its_parts():
    """The parts are public attributes of the model, and the packet entry points are the parts' own."""
    from p4gen.planner import make_plan
    from p4gen.spec import make_spec
    from p4gen.target import load_target

    m = SwitchModel(make_plan(make_spec(slots=4, elements_per_packet=8, variant="hardened"), load_target("bmv2")))
    assert isinstance(m.state, state.SwitchState) and isinstance(m.program, decider.DecisionProgram)
    assert isinstance(m.packet_path, interpreter.PacketPath) and isinstance(m.batch_path, batch.BatchPath)
    assert m.process == m.packet_path.process and m.process_batch == m.batch_path.process_batch
    assert m.groups is m.state.groups and m.stat_names is m.state.stat_names
    m.entry_trace = []
    assert m.program.entry_trace == []


def test_a_turn_lock_serves_the_waiting_thread_before_the_one_that_just_released_it():
    """The lock the packet loop and the P4Runtime server share hands itself to the thread that waited: a
    Write that releases it and asks again at once comes after the packet loop (a plain lock lets it take
    the lock straight back, so a long Write kept the packet loop waiting for seconds)."""
    import threading
    import time

    from p4gen.switch.turns import TurnLock

    lock, order, queued = TurnLock(), [], threading.Event()
    lock.acquire()

    def packet_loop():
        queued.set()
        with lock:
            order.append("packets")

    t = threading.Thread(target=packet_loop)
    t.start()
    queued.wait()
    time.sleep(0.05)                          # the packet loop waits in the lock's queue
    lock.release()
    with lock:                                # the writer asks again at once
        with lock:                            # (reentrant)
            order.append("write")
    t.join()
    assert order == ["packets", "write"]
    lock.acquire()
    got = []
    waiter = threading.Thread(target=lambda: got.append(lock.acquire(timeout=0.05)))
    waiter.start()
    waiter.join()
    lock.release()
    assert got == [False] and lock.acquire(blocking=False)
    lock.release()
    with pytest.raises(RuntimeError):
        lock.release()


def test_a_run_of_table_changes_rebuilds_the_batch_paths_arrays_once_and_batches_stay_exact():
    """Inside ``SwitchState.deferred`` a change of the workers table only marks the batch path's arrays
    stale (batches then look frames up one by one); at the end they are rebuilt once, and batches give
    what a model configured at once gives."""
    import numpy as np

    from p4gen.host import packet as P
    from p4gen.planner import make_plan
    from p4gen.spec import make_spec
    from p4gen.switch.model import WorkerAddr, job_config
    from p4gen.switch.turns import TurnLock
    from p4gen.target import load_target
    from p4gen.wire import FrameLayout

    plan = make_plan(make_spec(slots=16, elements_per_packet=8, max_workers=8), load_target("bmv2"))
    addrs = [WorkerAddr(1 + i, 0x020000000100 + i, 0x0A000001 + i, 41000 + i) for i in range(8)]
    cfg = job_config(plan, 1, addrs, slot_count=16)
    lookup = None
    a, b = SwitchModel(plan), SwitchModel(plan)
    a.load_config(cfg)
    builds = []
    lookup = next(v for v in vars(b.batch_path).values() if isinstance(v, batch_workers.WorkerLookup))
    real = lookup._compute
    lookup._compute = lambda items: builds.append(len(items)) or real(items)
    with b.state.deferred(TurnLock()):
        for g, reps in cfg["groups"].items():
            b.state.set_group(int(g), reps)
        for table, entries in cfg["tables"].items():
            for e in entries:
                b.state.insert(table, e["match"], e["action"], e["params"])
            assert table != "workers" or not lookup.usable
    assert builds == [8] and lookup.usable
    layout = FrameLayout(plan)
    switch = P.endpoint("02:00:00:00:00:fe", "10.0.0.254", 48864)
    frames = [(P.contribution_frame(layout, P.Endpoint(w.mac, w.ip, w.udp_port), switch, job=1, tsi=s, pool_index=s,
                                    exponent=0, values=np.arange(8) + w.port), w.port)
              for s in range(4) for w in addrs]
    assert b.process_batch(frames) == a.process_batch(frames)
    assert b.stats == a.stats and b.stats["multicast"] == 4
