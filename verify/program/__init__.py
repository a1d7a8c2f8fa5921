"""The program check: ``program.p4`` itself, as p4c reads it, equals what the proofs proved.

``p4gen verify`` proves the plan's decision table with the ops of ``p4gen.ops``.  This package checks
that the program beside the plan implements exactly that, element by element, from p4c's own IR
(``p4test --toJSON``, :mod:`.p4test`), never from the text p4gen's renderer printed:

* declarations (:mod:`.structure`): every table's keys, actions, const entries and default action;
  every action's parameters; every header type's fields; the deparser's emit order;
* behaviour (:mod:`.ingress`, with Z3 over a symbolic run of parser and ingress, :mod:`.symexec`):
  each decision action's register work equals the op the plan names for it, on every lane and every
  register, at the plan's index; each op's output is what later tables key on and what leaves in the
  packet; a packet that is not a contribution changes nothing and is dropped; the outcome's forwarding;
  the parser's extraction order; and, for layouts of several passes, each later pass (:mod:`.passes`).

A difference is one line naming the P4 element, e.g. ``program.p4: RegisterAction
worker_count_inc_sat_ra stores (value - 1) in worker_count where ops.py's counter inc_sat stores
(value + 1) ...``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

from p4gen.errors import EXIT_PROGRAM_NOT_CHECKED, PlanError

from .ir import IR, IRError, Node
from .p4test import find, read_ir

__all__ = ["Background", "MISSING", "NO_PROGRAM_CHECK", "NotChecked", "ProgramCheck", "check",
           "check_ir", "find"]


@dataclass
class ProgramCheck:
    """What the program check found: ``differences`` (empty: the program is the plan's), what it
    covered, and how long p4test and the checks took."""
    differences: list[str] = field(default_factory=list)
    checked: dict[str, int] = field(default_factory=dict)
    p4test_s: float = 0.0
    check_s: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.differences

    def to_json(self) -> dict:
        return {"verdict": "proved" if self.ok else "REFUSED", "differences": list(self.differences),
                "checked": dict(self.checked), "p4test_s": round(self.p4test_s, 3),
                "check_s": round(self.check_s, 3)}

    def lines(self) -> list[str]:
        what = ", ".join(f"{v} {k}" for k, v in self.checked.items())
        if self.ok:
            return [f"  {'program.p4':<28} proved  p4c's IR equals the plan: {what} "
                    f"(p4test {self.p4test_s:.1f}s, check {self.check_s:.1f}s)"]
        return [f"  {'program.p4':<28} REFUSED {d}" for d in self.differences]


@dataclass
class NotChecked:
    """The program check did not run: ``reason`` says why (no p4test, or ``--plan-only``)."""
    reason: str
    missing: bool = False          # p4test is not on PATH (verify exits with NO_PROGRAM_CHECK)

    ok = True

    def to_json(self) -> dict:
        return {"verdict": "not checked", "reason": self.reason}

    def lines(self) -> list[str]:
        return [f"  {'program.p4':<28} not checked: {self.reason}"]


# the exit status of a verify whose proofs all hold but whose program p4c could not read (no p4test)
NO_PROGRAM_CHECK = EXIT_PROGRAM_NOT_CHECKED
MISSING = ("p4test is not on PATH, so verify proved the plan only (exit status 3); put p4c's p4test on "
           "PATH to check program.p4, or pass --plan-only")


class Background:
    """p4test run on the program in a thread beside the proofs (it is a process of its own); the checks,
    which use Z3 (whose context is not shared between threads), run in the caller's thread."""

    def __init__(self, plan, directory: str | Path, exe: str):
        import threading

        self.plan = plan
        self._ir: IR | None = None
        self._error: BaseException | None = None
        self._took = 0.0
        program = Path(directory) / "program.p4"
        if not program.exists():
            raise PlanError(f"{str(program)!r} does not exist: there is no program to check (rebuild with "
                            f"p4gen build)")

        def work() -> None:
            t0 = time.perf_counter()
            try:
                self._ir = read_ir(program, plan.arch, exe)
            except BaseException as exc:  # noqa: BLE001 - handed to the caller in result()
                self._error = exc
            self._took = time.perf_counter() - t0

        self._thread = threading.Thread(target=work, name="p4gen-p4test", daemon=True)
        self._thread.start()

    def result(self) -> ProgramCheck:
        self._thread.join()
        if self._error is not None:
            raise self._error
        res = check_ir(self.plan, self._ir)
        res.p4test_s = self._took
        return res


def blocks(ir: IR, arch: str) -> dict[str, Node]:
    """The program's parser, ingress, egress and deparser, as its package instance names them."""
    if arch == "v1model":
        inst, roles = "main", ("parser", None, "ingress", "egress", None, "deparser")
    else:
        inst, roles = "pipe", ("parser", "ingress", "deparser", None, "egress", None)
    decls = ir.find("Declaration_Instance", inst)
    if not decls:
        raise IRError(f"no package instance {inst!r}")
    out: dict[str, Node] = {}
    for role, a in zip(roles, ir.vec(decls[0]["arguments"])):
        e = ir.get(a["expression"])
        if role is None or e["Node_Type"] != "ConstructorCallExpression":
            continue
        name = ir.pname(ir.get(e["constructedType"]))
        found = [o for o in ir.top if o["Node_Type"] in ("P4Parser", "P4Control") and o.get("name") == name]
        if found:
            out[role] = found[0]
    missing = {"parser", "ingress", "deparser"} - set(out)
    if missing:
        raise IRError(f"the package instance {inst!r} names no {', '.join(sorted(missing))}")
    return out


def check_ir(plan, ir: IR) -> ProgramCheck:
    """Check an IR already read: the declarations first, then the behaviour."""
    from . import ingress, structure

    res = ProgramCheck()
    t0 = time.perf_counter()
    try:
        b = blocks(ir, plan.arch)
        controls = {"ingress": b["ingress"], **({"egress": b["egress"]} if "egress" in b else {})}
        diffs = structure.check_headers(plan, ir) + structure.check_actions(plan, ir, controls) + \
            structure.check_tables(plan, ir, controls) + structure.check_deparser(plan, ir, b["deparser"])
        res.checked = {"tables": len(plan.tables), "actions": len(plan.actions), "headers": len(plan.headers)}
        if not diffs:
            ck = ingress.IngressCheck(plan, ir, b["parser"], b["ingress"])
            diffs = ck.run()
            res.checked.update(ck.covered)
    except (IRError, KeyError, LookupError, StopIteration) as exc:
        text = str(exc).strip("'\"") or exc.__class__.__name__
        diffs = [f"program.p4: the program check cannot read this program ({text})"]
    except ingress.Undecided as exc:
        diffs = [f"program.p4: NOT DECIDED: the solver's budget ran out on {exc}"]
    res.differences = diffs
    res.check_s = time.perf_counter() - t0
    return res


def check(plan, directory: str | Path, exe: str | None = None) -> ProgramCheck:
    """Run p4test on ``directory/program.p4`` and check what p4c read against ``plan``.  Raises
    PlanError when p4test is not on PATH (and ``exe`` not given), when there is
    no program.p4 or p4test refuses it."""
    program = Path(directory) / "program.p4"
    if not program.exists():
        raise PlanError(f"{str(program)!r} does not exist: there is no program to check (rebuild with "
                        f"p4gen build)")
    t0 = time.perf_counter()
    ir = read_ir(program, plan.arch, exe)
    took = time.perf_counter() - t0
    res = check_ir(plan, ir)
    res.p4test_s = took
    return res
