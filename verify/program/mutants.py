"""Generator mutants: small faults in the P4 forms p4gen's renderer prints, each of which the program
check must refuse.

A fault a renderer could make (an operator swapped, a comparison off by one, a lane's slice swapped, the
copy bit inverted, the wrong multicast group, ...) is applied to ``program.p4`` as it was rendered: the
first place the form occurs is edited.  p4c then reads the faulty program and :func:`..check_ir` must
refuse it with its one-line difference.  A fault whose form the program does not print is reported as
not applicable, not as refused.
"""

from __future__ import annotations

import re
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from p4gen.fileread import read_text
from p4gen.errors import PlanError


@dataclass(frozen=True)
class GeneratorMutant:
    name: str
    description: str
    archs: tuple[str, ...]          # the architectures whose programs print the form
    pattern: str                    # a regular expression for the form (its first match is edited)
    repl: str                       # the replacement (``re.sub`` syntax)

    def apply(self, text: str) -> str | None:
        """``text`` with the fault applied at the first place the form occurs, or None."""
        new, n = re.subn(self.pattern, self.repl, text, count=1, flags=re.M)
        return new if n else None


TNA, V1 = ("tna", "t2na"), ("v1model",)
ANY = TNA + V1

CATALOGUE: tuple[GeneratorMutant, ...] = (
    GeneratorMutant("add_as_sub", "a value RegisterAction subtracts the packet's value instead of adding it", TNA,
                    r"value = \(value \+ (hdr\.data0\.d\d+)\);", r"value = (value - \1);"),
    GeneratorMutant("lane_add_as_sub", "a value lane's sum subtracts instead of adding", V1,
                    r"= \((values\d+_v\[\d+:\d+\]) \+ (hdr\.data0\.d\d+)\);", r"= (\1 - \2);"),
    GeneratorMutant("lane_slice_swapped", "a value register's second lane is read from the first lane's bits", V1,
                    r"\((values\d+)_v\[63:32\] \+", r"(\1_v[31:0] +"),
    GeneratorMutant("counter_off_by_one", "the worker counter's 'last' comparison is off by one", TNA,
                    r"if \(\(value \+ 32w1\) == meta\.num_workers\)", r"if ((value + 32w2) == meta.num_workers)"),
    GeneratorMutant("counter_increment_two", "the worker counter adds two", V1,
                    r"(bit<32> worker_count_t\d+ = \(worker_count_v) \+ 32w1\);", r"\1 + 32w2);"),
    GeneratorMutant("counter_test_negated", "the worker counter's 'full' test is negated", TNA,
                    r"if \(value == meta\.num_workers\)", r"if (value != meta.num_workers)"),
    GeneratorMutant("counter_fixed_state", "the counter reports 'mid' where the op reports 'last'", TNA,
                    r"(\n\s+)rv = 2;", r"\1rv = 0;"),
    GeneratorMutant("copy_bit_inverted", "the packet's copy is the inverse of pool_index's top bit", ANY,
                    r"meta\.copy = hdr\.agg\.pool_index\[15:15\];", r"meta.copy = ~hdr.agg.pool_index[15:15];"),
    GeneratorMutant("wrong_multicast_group", "the result is multicast to the worker's group plus one", V1,
                    r"std\.mcast_grp = meta\.mgid;", r"std.mcast_grp = meta.mgid + 1;"),
    GeneratorMutant("wrong_multicast_group_tna", "the result is multicast to the worker's group plus one", TNA,
                    r"ig_tm_md\.mcast_grp_a = meta\.mgid;", r"ig_tm_md.mcast_grp_a = meta.mgid + 1;"),
    GeneratorMutant("index_swapped", "a register's (slot, copy) index is hashed as (copy, slot)", TNA,
                    r"\.get\(\{meta\.slot, meta\.copy\}\)", r".get({meta.copy, meta.slot})"),
    GeneratorMutant("index_copy_dropped", "a register is indexed by slot << 1 without the copy", V1,
                    r"meta\.sc_index = \(\(bit<32>\) meta\.slot << 1\) \| \(bit<32>\) meta\.copy;",
                    r"meta.sc_index = ((bit<32>) meta.slot << 1);"),
    GeneratorMutant("bitmap_not_cleared", "a new chunk's bitmap row keeps the old bits (set, not reset_set)", TNA,
                    r"value\.lo = meta\.mask0;", r"value.lo = value.lo | meta.mask0;"),
    GeneratorMutant("bitmap_row_not_cleared", "a new chunk's bitmap word keeps the old bits", V1,
                    r"\+\+ meta\.mask0\);", r"++ (bitmap0_v[31:0] | meta.mask0));"),
    GeneratorMutant("execute_without_target", "a counter's returned state is not stored", TNA,
                    r"meta\.count = (worker_count_\w+_ra\.execute)", r"\1"),
    GeneratorMutant("entry_choice_swapped", "a decision entry runs the next op of its step",
                    ANY, r"(\(1, 0\) : counter_)inc_sat\(\)", r"\1probe_full()"),
    GeneratorMutant("chunk_newer_negated", "the chunk register's 'newer' test is reversed", ANY,
                    r"\(hdr\.agg\.tsi > (value|chunk_v)\)", r"(hdr.agg.tsi < \1)"),
    GeneratorMutant("unicast_not_swapped", "a retransmission's answer keeps its UDP ports", ANY,
                    r"hdr\.udp\.dst_port = hdr\.udp\.src_port;", r"hdr.udp.dst_port = hdr.udp.dst_port;"),
)


@dataclass
class MutantResult:
    mutant: GeneratorMutant
    applicable: bool
    refused: bool
    difference: str
    seconds: float

    def line(self) -> str:
        m = self.mutant
        if not self.applicable:
            return f"  {m.name:<28} not applicable (the program prints no such form)"
        verdict = "refused" if self.refused else "NOT REFUSED"
        return f"  {m.name:<28} {verdict:<12} {self.difference[:160]}  ({self.seconds:.1f}s)"

    def to_json(self) -> dict:
        return {"mutant": self.mutant.name, "description": self.mutant.description, "applicable": self.applicable,
                "refused": self.refused or not self.applicable, "difference": self.difference,
                "seconds": round(self.seconds, 3)}


def applicable(plan, text: str) -> list[tuple[GeneratorMutant, str]]:
    """The mutants whose form ``text`` (a program of ``plan``'s architecture) prints, with their program."""
    out = []
    for m in CATALOGUE:
        if plan.arch in m.archs:
            new = m.apply(text)
            if new is not None:
                out.append((m, new))
    return out


def one(plan, mutant: GeneratorMutant, text: str | None, exe: str | None = None) -> MutantResult:
    """Read the faulty program ``text`` through p4c and check it against ``plan``."""
    return _checked(plan, mutant, _read(plan, mutant, text, exe))


def _read(plan, mutant: GeneratorMutant, text: str | None, exe: str | None):
    """(IR or None, p4test's refusal, seconds) of a mutant's program (p4test only: safe in a thread)."""
    import time

    from .p4test import read_ir

    if text is None:
        return None, None, 0.0
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="p4gen-mutant-") as tmp:
        path = Path(tmp) / "program.p4"
        path.write_text(text, encoding="utf-8")
        try:
            return read_ir(path, plan.arch, exe), None, time.perf_counter() - t0
        except PlanError as exc:
            return None, str(exc), time.perf_counter() - t0


def _checked(plan, mutant: GeneratorMutant, read) -> MutantResult:
    import time

    from . import check_ir

    ir, refused_by_p4c, took = read
    if ir is None and refused_by_p4c is None:
        return MutantResult(mutant, False, False, "", 0.0)
    if ir is None:
        return MutantResult(mutant, True, True, refused_by_p4c, took)
    t0 = time.perf_counter()
    res = check_ir(plan, ir)
    return MutantResult(mutant, True, not res.ok, res.differences[0] if res.differences else "",
                        took + time.perf_counter() - t0)


def run(plan, directory: str | Path, jobs: int | None = None, exe: str | None = None) -> list[MutantResult]:
    """Every generator mutant of the catalogue for the plan's architecture, applied to
    ``directory/program.p4``: p4test reads the mutants in ``jobs`` threads, the checks (Z3) run here."""
    from .. import runner

    text = read_text(Path(directory) / "program.p4", "program.p4", PlanError)
    todo = [(m, m.apply(text)) for m in CATALOGUE if plan.arch in m.archs]
    with ThreadPoolExecutor(max_workers=jobs or runner.default_jobs()) as pool:
        reads = list(pool.map(lambda mt: _read(plan, mt[0], mt[1], exe), todo))
    return [_checked(plan, m, r) for (m, _t), r in zip(todo, reads)]
