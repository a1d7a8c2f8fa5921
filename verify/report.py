"""The report of ``p4gen verify``: one line per property, traces, mutants, JSON."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from .engine import Counterexample

PROVED, COUNTEREXAMPLE, NOT_PROVED, NOT_COVERED = "proved", "COUNTEREXAMPLE", "NOT PROVED", "NOT COVERED"


def ns_text(ns: list[int]) -> str:
    if not ns:
        return "n=none"
    if len(ns) > 2 and ns == list(range(ns[0], ns[-1] + 1)):
        return f"n={ns[0]}..{ns[-1]}"
    return "n=" + ",".join(map(str, ns))


@dataclass
class PropertyLine:
    group: str
    name: str
    status: str            # proved | COUNTEREXAMPLE | NOT PROVED | NOT COVERED
    seconds: float
    ns: list[int]          # the worker counts the status is about
    detail: str = ""
    counterexample: Counterexample | None = None

    def to_json(self) -> dict[str, Any]:
        d = {"group": self.group, "property": self.name, "status": self.status, "seconds": round(self.seconds, 3),
             "n": self.ns, "detail": self.detail}
        if self.counterexample:
            d["counterexample"] = self.counterexample.to_json()
        return d

    def print(self, out: Callable[[str], Any]) -> None:
        out(f"{self.group + '/' + self.name:<40} {ns_text(self.ns):<10} {self.status:<15} {self.seconds:7.2f}s"
            + (f"  {self.detail}" if self.detail else ""))
        if self.counterexample:
            for row in self.counterexample.format():
                out(row)


@dataclass
class MutantLine:
    name: str
    variant: str
    description: str
    n: int
    seconds: float
    counterexample: Counterexample | None
    reach: str             # how far the search went (when it found no trace)
    deadlock: bool = False  # a deadlock mutant: refuted only by a trace that ends in a deadlock

    @property
    def refuted(self) -> bool:
        return self.counterexample is not None and (not self.deadlock or bool(self.counterexample.deadlock))

    def to_json(self) -> dict[str, Any]:
        return {"mutant": self.name, "variant": self.variant, "description": self.description, "n": self.n,
                "refuted": self.refuted, "seconds": round(self.seconds, 3), "deadlock": self.deadlock,
                "search": self.reach if self.counterexample is None else "",
                "counterexample": self.counterexample.to_json() if self.counterexample else None}

    def print(self, out: Callable[[str], Any]) -> None:
        cex = self.counterexample
        if cex is None:
            status = f"NOT REFUTED: no counterexample within {self.reach}"
        else:
            status = (f"refuted ({cex.prop}, {cex.steps} steps" + (", then a deadlock)" if cex.deadlock else ")")
                      + ("" if self.refuted else "; NOT REFUTED as a deadlock"))
        out(f"mutant/{self.name:<36} n={self.n:<8} {status:<40} {self.seconds:7.2f}s")
        if cex:
            for row in cex.format():
                out(row)


@dataclass
class VerifyReport:
    variant: str
    fifo: bool
    assumptions: list[str]
    required: list[int]
    lines: list[PropertyLine] = field(default_factory=list)
    mutants: list[MutantLine] = field(default_factory=list)
    seconds: float = 0.0
    jobs: int = 1
    budget: str = ""
    artifacts: dict[str, str | None] = field(default_factory=dict)   # file -> SHA-256 (verify.artifacts)
    program: dict[str, Any] | None = None     # the program check (verify.program): None when not run
    generator_mutants: list[dict[str, Any]] = field(default_factory=list)   # verify.program.mutants

    @property
    def ok(self) -> bool:
        return (bool(self.lines) and all(l.status == PROVED for l in self.lines)
                and all(m.refuted for m in self.mutants)
                and (self.program is None or self.program.get("verdict") != "REFUSED")
                and all(g["refused"] for g in self.generator_mutants))

    def to_json(self) -> dict[str, Any]:
        return {"ok": self.ok, "variant": self.variant, "fifo": self.fifo, "assumptions": self.assumptions,
                "n_required": [self.required[0], self.required[-1]] if self.required else [],
                "properties": [l.to_json() for l in self.lines], "mutants": [m.to_json() for m in self.mutants],
                "seconds": round(self.seconds, 3), "jobs": self.jobs, "budget": self.budget, "artifacts": self.artifacts,
                "program": self.program, "generator_mutants": self.generator_mutants}
