"""Resource report (text and JSON) for a Plan."""

from __future__ import annotations

import json
from typing import Any

from ..plan import Plan


def _frac(used: int, limit: int | None) -> str:
    if limit is None:
        return f"{used}/-"
    return f"{used}/{limit}"


def report_dict(plan: Plan) -> dict[str, Any]:
    p = plan.params
    stages = []
    for st in plan.stages:
        row = {"stage": st.index, "registers": list(st.registers), "tables": list(st.tables),
               "alus_used": st.alus_used, "alus_limit": st.alus_limit,
               "sram_blocks_used": st.sram_blocks_used, "sram_blocks_limit": st.sram_blocks_limit}
        if row["alus_limit"] is not None:
            row["alus_headroom"] = row["alus_limit"] - row["alus_used"]
            row["sram_blocks_headroom"] = row["sram_blocks_limit"] - row["sram_blocks_used"]
        stages.append(row)
    header_bytes = {h.name: h.bytes * h.repeat for h in plan.headers if not h.internal}
    plain = plan.to_dict()
    return {
        "protocol": plan.protocol, "variant": plan.variant, "requested_variant": plan.requested_variant,
        "assumption": plan.decision.assumption,
        "target": plan.target.name, "arch": plan.arch,
        "slots": p.slots, "elements_per_packet": p.elements_per_packet,
        "elements_per_pass": p.elements_per_pass, "passes": p.passes,
        "max_workers": p.max_workers, "jobs": p.jobs, "value_width": p.value_width,
        "frame_bytes": sum(header_bytes.values()), "header_bytes": header_bytes,
        "stages": stages, "totals": plain["resources"], "alternative": plain["alternative"],
        "largest_slots": plan.limits.largest_slots,
    }


def render_report_json(plan: Plan) -> str:
    return json.dumps(report_dict(plan), indent=2, sort_keys=True) + "\n"


def _pass_note(p) -> str:
    """How the passes run, when not resident in one pipe (docs/layout.md)."""
    notes = []
    if p.passes > 1 and p.pass_mode == "stream":
        notes.append("streamed: each pass parses only its own values, results read back in harvest passes")
    if p.pass_pipes > 1:
        notes.append(f"folded over {p.pass_pipes} pipes (their ports at the workers' port numbers in loopback)")
    return "; " + "; ".join(notes) if notes else ""


# What a compile by each compiler checks of a program, as `p4gen build --compile` and report.txt say it.
CHECKS = {
    "p4test": "the front end only (syntax, types, the architecture's externs), not stages, PHV or SRAM",
    "p4c-bm2-ss": "the whole program for BMv2 (program.json, P4Info); BMv2 has no stage, PHV or SRAM limits",
    "p4c-barefoot": "stages, stateful ALUs, SRAM and PHV as allocated on the chip, beside p4gen's prediction",
    "bf-p4c": "stages, stateful ALUs, SRAM and PHV as allocated on the chip, beside p4gen's prediction",
}


def compiled_by(compiler: str, version_label: str) -> dict[str, str]:
    """report.json's ``compiled``: which compiler checked the program (its ``--version`` line) and what that
    check covers."""
    return {"compiler": version_label, "covers": CHECKS[compiler]}


def _prediction_note(plan: Plan, compiled: dict[str, str] | None, allocated: bool) -> list[str]:
    """Lines that say which figures are p4gen's predictions, on a target whose stages the Tofino compiler
    allocates; and, after a compile, what the compiler checked."""
    lines = []
    if plan.target.has_stage_limits:
        if allocated:
            lines.append("  predicted    the figures above are p4gen's model; the compiler's allocation is below")
        else:
            lines.append("  predicted    the figures above are p4gen's model: no Tofino compiler allocated them "
                         "(--compile with p4c-barefoot or bf-p4c on PATH does)")
    if compiled is not None and not allocated:
        lines += [f"  compiled by  {compiled['compiler']}; its log is compile.log", f"  checked      {compiled['covers']}"]
    return lines


def render_report_text(plan: Plan, compiled: dict[str, str] | None = None, allocated: bool = False) -> str:
    """report.txt.  ``compiled``: :func:`compiled_by` of a ``--compile`` build; ``allocated``: the Tofino
    compiler's allocation follows (:func:`p4gen.tofino_compiler.comparison_lines`)."""
    r = report_dict(plan)
    p = plan.params
    tot = r["totals"]
    lines = [
        f"p4gen build report: {r['protocol']} on {r['target']} ({r['arch']})",
        f"  variant      {r['variant']} (requested: {r['requested_variant']})",
        f"  assumption   {r['assumption']}",
        f"  slots        {r['slots']} per copy, 2 copies (largest that fits this layout: {r['largest_slots']})",
        f"  elements     {r['elements_per_packet']} per packet = {r['passes']} pass(es) of {r['elements_per_pass']}, "
        f"{r['value_width']}-bit values" + _pass_note(p),
        f"  workers      up to {r['max_workers']} per job, {r['jobs']} job(s)",
        f"  frame        {r['frame_bytes']} bytes (" + ", ".join(f"{k} {v}" for k, v in r["header_bytes"].items()) + ")",
        "",
        f"  {'stage':>5}  {'stateful ALUs':>13}  {'SRAM blocks':>11}  contents",
    ]
    for st in r["stages"]:
        contents = ", ".join(st["tables"] + st["registers"]) or "-"
        if len(contents) > 60:
            contents = contents[:57] + "..."
        lines.append(f"  {st['stage']:>5}  {_frac(st['alus_used'], st['alus_limit']):>13}  "
                     f"{_frac(st['sram_blocks_used'], st['sram_blocks_limit']):>11}  {contents}")
    lines += [
        "",
        f"  total        stages {_frac(tot['stages_used'], tot['stages_limit'])}, stateful ALUs "
        f"{_frac(tot['alus_used'], tot['alus_limit'])}, SRAM blocks {_frac(tot['sram_blocks_used'], tot['sram_blocks_limit'])}, "
        f"PHV bits {_frac(tot['phv_bits_used'], tot['phv_bits_limit'])}, passes {_frac(tot['passes'], tot['passes_limit'])}",
        f"  registers    {tot['register_bits'] // 8} bytes of switch state",
    ]
    alt = r["alternative"]
    if alt["fits"]:
        lines.append(f"  other variant {alt['variant']}: {alt['register_arrays_delta']:+d} register array(s), "
                     f"{alt['sram_blocks_delta']:+d} SRAM blocks, {alt['stages_delta']:+d} stage(s), "
                     f"{alt['register_bits_delta'] // 8:+d} bytes of state")
    else:
        lines.append(f"  other variant {alt['variant']}: does not fit ({alt['why']})")
    lines += _prediction_note(plan, compiled, allocated)
    return "\n".join(lines) + "\n"
