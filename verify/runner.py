"""``p4gen verify``: run the fixed-point and protocol proofs for a Plan and report.

One line per property (``proved`` or ``COUNTEREXAMPLE`` plus time);
counterexamples print a packet trace table.  The report is also written as
JSON (``verify.json``) by the CLI.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable

from p4gen import decision
from p4gen.errors import PlanError

from . import fixedpoint, protocol
from .mutants import CATALOGUE, mutant_config

BMC_DEPTH = 12
MAX_PROTOCOL_N = protocol.WORD   # one bitmap word


@dataclass
class PropertyLine:
    group: str
    name: str
    status: str            # proved | COUNTEREXAMPLE | NOT PROVED
    seconds: float
    ns: list[int]
    detail: str = ""
    counterexample: protocol.Counterexample | None = None

    def to_json(self) -> dict[str, Any]:
        d = {"group": self.group, "property": self.name, "status": self.status, "seconds": round(self.seconds, 3),
             "n": self.ns, "detail": self.detail}
        if self.counterexample:
            d["counterexample"] = self.counterexample.to_json()
        return d


@dataclass
class _RowLine:
    """A property result that arrives as its JSON row (the OmniReduce model's results)."""

    row: dict[str, Any]

    @property
    def status(self) -> str:
        return self.row["status"]

    def to_json(self) -> dict[str, Any]:
        return self.row


@dataclass
class VerifyReport:
    variant: str
    fifo: bool
    assumptions: list[str]
    lines: list[PropertyLine] = field(default_factory=list)
    mutants: list[dict[str, Any]] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return all(l.status == "proved" for l in self.lines) and all(m["refuted"] for m in self.mutants)

    def to_json(self) -> dict[str, Any]:
        return {"ok": self.ok, "variant": self.variant, "fifo": self.fifo, "assumptions": self.assumptions,
                "properties": [l.to_json() for l in self.lines], "mutants": self.mutants,
                "seconds": round(self.seconds, 3)}


def _ns_text(ns: list[int]) -> str:
    if ns and ns == list(range(ns[0], ns[-1] + 1)) and len(ns) > 2:
        return f"n={ns[0]}..{ns[-1]}"
    return "n=" + ",".join(map(str, ns))


def _print_line(out, l: PropertyLine) -> None:
    out(f"{l.group + '/' + l.name:<40} {_ns_text(l.ns):<10} {l.status:<15} {l.seconds:7.2f}s"
        + (f"  {l.detail}" if l.detail else ""))
    if l.counterexample:
        for row in l.counterexample.format():
            out(row)


def _plan_params(plan) -> tuple[dict[str, Any], dict[str, Any]]:
    try:
        params = plan.params
        table = plan.decision
        decision.validate(table)
        int(params["max_workers"]), int(params["value_width"]), int(params["slots"])
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise PlanError(f"plan.json has no usable params/decision table: {exc}") from None
    if params["value_width"] not in (16, 32):
        raise PlanError(f"plan.json value_width={params['value_width']!r} must be 16 or 32")
    return params, table


def run(plan, *, fifo: bool | None = None, mutants: bool = False, workers: list[int] | None = None,
        out: Callable[[str], Any] = print) -> VerifyReport:
    """Prove the plan's fixed-point and slot-reuse properties; optionally refute the mutant catalogue."""
    t_start = time.perf_counter()
    params, table = _plan_params(plan)
    variant = table.get("variant", plan.data.get("variant", "?"))
    max_n = int(params["max_workers"])
    w = int(params["value_width"])
    slots = int(params["slots"])
    if workers:
        bad = [n for n in workers if not 2 <= n <= max_n]
        if bad:
            raise PlanError(f"--workers {bad[0]} must be in 2..{max_n} (the plan's max_workers)")
        ns = sorted(set(workers))
    else:
        ns = list(range(2, max_n + 1))
    if fifo is None:
        fifo = variant == "reference"
    assumptions = [
        f"decision table: {variant} variant ({table.get('assumption', '')})",
        "network: switch->worker results may be lost, duplicated and reordered; worker->switch packets may be "
        "lost, duplicated and reordered" + (", except that each worker's link to the switch delivers in order "
                                            "(FIFO)" if fifo else " (no FIFO assumption)"),
        "workers label-check results; tsi does not wrap within a job; one slot is modelled (slots are independent)",
        "values are generic (distinct contributions give distinct sums); the exponent rows are in the protocol "
        "model as 'which contributions the max covers', and fixedpoint/max_exponent proves the 8-bit max itself",
    ]
    rep = VerifyReport(variant=variant, fifo=fifo, assumptions=assumptions)
    out(f"p4gen verify: {variant} variant, value_width={w}, max_workers={max_n}, slots={slots}")
    for a in assumptions:
        out(f"  assume: {a}")

    # fixed point
    fp = fixedpoint.prove_all(ns, w)
    for name, results in fp.items():
        bad = [r for r in results if not r.proved]
        l = PropertyLine("fixedpoint", name, "proved" if not bad else "COUNTEREXAMPLE",
                         sum(r.seconds for r in results), ns,
                         f"w={w}" if not bad else f"n={bad[0].n}: {bad[0].detail}")
        rep.lines.append(l)
        _print_line(out, l)

    # protocol
    pns = [n for n in ns if n <= MAX_PROTOCOL_N]
    if plan.data.get("protocol") == "omnireduce":
        from . import omni

        for row in omni.run_omnireduce(plan, workers=pns, mutants=mutants, out=out):
            if "mutant" in row:
                rep.mutants.append(row)
            else:
                rep.lines.append(_RowLine(row))
        rep.seconds = time.perf_counter() - t_start
        out(f"{'verified' if rep.ok else 'FAILED'} in {rep.seconds:.1f}s")
        return rep
    lines = _protocol_lines(table, pns, fifo, slots, w)
    for l in lines:
        rep.lines.append(l)
        _print_line(out, l)
    if len(pns) < len(ns):
        out(f"  note: protocol proofs cover n <= {MAX_PROTOCOL_N} (one bitmap word); n={pns[-1] + 1}..{ns[-1]} not covered")

    if mutants:
        out(f"mutants of the plan's {variant} table (each must be refuted by a concrete trace):")
        for m in (m for m in CATALOGUE if m.variant == variant):
            t0 = time.perf_counter()
            cfg = mutant_config(m, 2, slots, w, table)
            cex = protocol.bmc(cfg, BMC_DEPTH)
            dt = time.perf_counter() - t0
            rep.mutants.append({"mutant": m.name, "variant": m.variant, "description": m.description,
                                "refuted": cex is not None, "seconds": round(dt, 3),
                                "counterexample": cex.to_json() if cex else None})
            status = f"refuted ({cex.prop}, {cex.steps} steps)" if cex else f"NOT REFUTED within {BMC_DEPTH} steps"
            out(f"mutant/{m.name:<36} n=2        {status:<40} {dt:7.2f}s")
            if cex:
                for row in cex.format():
                    out(row)
    rep.seconds = time.perf_counter() - t_start
    out(f"{'verified' if rep.ok else 'FAILED'} in {rep.seconds:.1f}s")
    return rep


def _protocol_lines(table, ns: list[int], fifo: bool, slots: int, w: int) -> list[PropertyLine]:
    times = {p: 0.0 for p in protocol.PROPERTIES}
    inv_time = 0.0
    failed: protocol.InductionResult | None = None
    proved_ns: list[int] = []
    for n in ns:
        cfg = protocol.ModelConfig(n=n, table=table, fifo=fifo, slots=slots, value_width=w)
        res = protocol.prove(cfg)
        inv_time += res.times["invariant"]
        for p in protocol.PROPERTIES:
            times[p] += res.times[p]
        if not res.proved:
            failed = res
            break
        proved_ns.append(n)
    lines = []
    share = inv_time / max(1, len(protocol.PROPERTIES))
    if failed is None:
        for p in protocol.PROPERTIES:
            lines.append(PropertyLine("protocol", p, "proved", times[p] + share, ns))
        return lines
    # not proved at failed.n: look for concrete traces from the initial state
    n = failed.n
    cfg = protocol.ModelConfig(n=n, table=table, fifo=fifo, slots=slots, value_width=w)
    why = (f"invariant clause {failed.failed_clause} not inductive on {failed.failed_event}" if not failed.inductive
           else "property not implied by the invariant")
    for p in protocol.PROPERTIES:
        t0 = time.perf_counter()
        if failed.properties.get(p) == "proved":
            cex = None
        else:
            cex = protocol.bmc(cfg, BMC_DEPTH, [p])
        dt = time.perf_counter() - t0 + times[p] + share
        if cex is not None:
            lines.append(PropertyLine("protocol", p, "COUNTEREXAMPLE", dt, [n], f"{cex.steps} steps", cex))
        elif failed.properties.get(p) == "proved":
            lines.append(PropertyLine("protocol", p, "NOT PROVED", dt, [n], f"{why}; no violation of this property"))
        else:
            lines.append(PropertyLine("protocol", p, "NOT PROVED", dt, [n],
                                      f"{why}; no counterexample within {BMC_DEPTH} steps"))
    return lines
