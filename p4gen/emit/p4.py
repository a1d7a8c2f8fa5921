"""Render a Plan into P4_16 for TNA / T2NA (Tofino) or v1model (BMv2).

All values are computed here; the templates only lay them out.  The Jinja
environment is built once, with ``StrictUndefined`` so a typo in a template
fails the build instead of printing nothing.
"""

from __future__ import annotations

import functools
import re
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import jinja2

from .. import ops, protocols
from . import p4ops
from ..plan import Plan
from .templates import template_sources, templates_dir

__all__ = ["context", "environment", "render_p4", "template_sources"]


@functools.lru_cache(maxsize=1)
def environment() -> "jinja2.Environment":
    import jinja2

    root = templates_dir()
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(root)),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        autoescape=False,
    )


def _const_name(*parts: str) -> str:
    return "_".join(p.upper() for p in parts)


def _hex(v: int) -> str:
    return f"0x{v:x}"


def _port_range(lo: int, hi: int) -> tuple[int, int]:
    size = hi - lo + 1
    assert size & (size - 1) == 0 and lo % size == 0, "UDP port range must be an aligned power-of-two block"
    return lo, 0xFFFF & ~(size - 1)


def context(plan: Plan) -> dict[str, Any]:
    p = plan.params
    codes = plan.codes
    arch = plan.arch
    consts: list[tuple[str, int, str]] = [
        ("ETHERTYPE_IPV4", 16, "0x0800"), ("IPPROTO_UDP", 8, "17"),
        ("MSG_CONTRIBUTION", 4, str(p.msg_contribution)), ("MSG_RESULT", 4, str(p.msg_result)),
        ("SLOT_MASK", 16, _hex((1 << p.slot_bits) - 1)),
        ("FLOOD_GROUP_BASE", 16, _hex(p.flood_group_base)),
    ]
    # observations by name, values and outcomes by code: a plan read back from plan.json renders the same
    for obs in sorted(codes.observations):
        if obs == "seen":
            continue
        for name, code in sorted(codes.observations[obs].items(), key=lambda kv: (kv[1], kv[0])):
            consts.append((_const_name(obs, name), 8, str(code)))
    for name, code in sorted(codes.outcomes.items(), key=lambda kv: (kv[1], kv[0])):
        consts.append((_const_name("out", name), 8, str(code)))
    for i, name in enumerate(plan.stats):
        consts.append((_const_name("stat", name), 8, str(i)))
    op_const = {}
    # in the order of p4gen.ops, codes ascending: a plan read back from plan.json (keys sorted) renders the same
    roles = sorted(codes.ops, key=lambda r: (list(ops.OPS).index(r) if r in ops.OPS else len(ops.OPS), r))
    for role in roles:
        for op, code in sorted(codes.ops[role].items(), key=lambda kv: (kv[1], kv[0])):
            cname = _const_name("op", role, op)
            op_const[(role, op)] = cname
            consts.append((cname, 8, str(code)))
    udp_value, udp_mask = _port_range(p.udp_port_min, p.udp_port_max)

    headers = [h for h in plan.headers if h.name != "data"]
    data = plan.header("data")
    passes = p.passes
    regs = [{"r": r, "name": r.name, "role": r.role, "entries": r.entries, "entry_bits": r.entry_bits,
             "lanes": r.lanes, "lane_bits": r.lane_bits, "stage": r.stage, "id": r.id, "word": r.word,
             "elements": r.elements, "p4type": _register_type(r), "comment": _register_comment(r)}
            for r in plan.registers]
    steps_p4 = p4ops.steps(plan)
    step_roles = [s.role for s in plan.decision.steps]
    stream = passes > 1 and p.pass_mode == "stream"

    tables = {}
    for t in plan.tables:
        entries = []
        for e in t.entries:
            entries.append({"match": [str(e.match[k.name]) for k in t.keys], "action": e.action,
                            "args": ", ".join(str(v) for v in e.args.values()), "comment": e.comment})
        tables[t.name] = {"name": t.name, "id": t.id, "keys": t.keys, "actions": t.actions, "size": t.size,
                          "default_action": t.default_action, "entries": entries,
                          "default_args": ", ".join(str(v) for v in (t.default_args or {}).values()),
                          "fq": plan.p4names.qualified(t.scope, t.name)}
    actions = {a.name: a for a in plan.actions}

    return {
        "plan": plan, "p": p, "arch": arch, "is_tna": arch in ("tna", "t2na"),
        "include": {"tna": "tna.p4", "t2na": "t2na.p4", "v1model": "v1model.p4"}[arch],
        "consts": consts, "op_const": op_const, "headers": headers, "data": data, "passes": passes,
        "data_insts": ["data0"] if stream else [f"data{i}" for i in range(passes)],
        "recirc": plan.header("recirc") if passes > 1 else None,
        "meta": list(plan.metadata), "meta_names": {f.name for f in plan.metadata},
        # set_worker's parameters the Tofino program reads neither into metadata nor into the slot's index
        "unused_worker_params": [prm.name for prm in actions["set_worker"].params
                                 if prm.name not in {f.name for f in plan.metadata}
                                 and prm.name not in ("slot_base", "slot_count", "mask")],
        "steps_p4": steps_p4, "hashes": p4ops.hashes(plan),
        # a word a RegisterAction returns meets these fields in one instruction: whole 32-bit containers
        "wide_fields": [n for s in steps_p4 for n, b in s.fields if b == 32]
                       + [f"mask{i}" for i in range(p.bitmap_words)],
        "derived_tables": [tables[t.name] for t in plan.tables
                           if t.name.startswith(("dt_", "run_")) and t.name != "dt_outcome"],
        **_pass_context(plan),
        "registers": regs, "step_roles": step_roles, "steps": plan.decision.steps,
        "tables": tables, "actions": actions, "stats": plan.counter("stats"),
        "udp_value": _hex(udp_value), "udp_mask": _hex(udp_mask),
        "w": p.value_width, "hexid": lambda v: f"0x{v:08x}",
        "names": plan.p4names,
        "omni": protocols.protocol(plan.protocol).sparse,
        "data_bytes": data.bytes,
    }


def _register_type(r) -> str:
    """The P4 type of one register entry: a lane, or a {lo, hi} pair."""
    if r.lanes == 1:
        return f"bit<{r.lane_bits}>"
    return "bitmap_pair_t" if r.role == "bitmap" else "pair_t"


def _register_comment(r) -> str:
    if r.role == "values":
        return f"elements {', '.join(map(str, r.elements))} of each pass"
    if r.role == "bitmap":
        return f"worker bitmap word {r.word} (workers {32 * r.word}..{32 * r.word + 31}), lo = copy 0, hi = copy 1"
    return {"chunk": "newest chunk per (slot, copy)", "counter": "contributions per (slot, copy)",
            "exponent": "largest exponent of the round", "minnext": "smallest next non-zero block offset of the round"}[r.role]


def _pass_context(plan: Plan) -> dict[str, Any]:
    """How the TNA program moves a packet between passes (see p4gen.pass_shape).

    ``recirc_ports``: select cases of the ports whose packets carry the pass header (the
    recirculation port; with folded pipes also every port of a pipe that holds no workers
    and the recirculation port of each home pipe); ``consume_port`` and ``harvest_port``:
    where the next consume or harvest pass enters; ``index_shift``: how far (slot, copy)
    is shifted to make room for the pass number in a value array's index (folded pipes
    each hold their own arrays, so none)."""
    from ..wire import PHASE_CONSUME, PHASE_HARVEST

    p = plan.params
    fold = p.pass_pipes
    ctx: dict[str, Any] = {"stream": p.passes > 1 and p.pass_mode == "stream", "folded": fold > 1,
                           "phase_consume": PHASE_CONSUME, "phase_harvest": PHASE_HARVEST}
    if fold == 1:
        return {**ctx, "recirc_ports": ["RECIRC_PORT"], "consume_port": "RECIRC_PORT", "harvest_port": "RECIRC_PORT",
                "index_shift": p.pass_bits}
    local = p.recirc_port & 0x7F
    ports = []
    for pipe in range(plan.target.pipes):
        if pipe % fold:
            ports.append(f"{_hex(pipe << 7)} &&& 0x180")     # a loopback pipe: every port
        else:
            ports.append(_hex(pipe << 7 | local))           # a home pipe: its recirculation port
    # pass k runs in pipe home + k: a consume pass enters the next pipe by the port with this one's number
    # there, a harvest pass the previous pipe's recirculation port (meta.hport: this pipe's, set at the start)
    return {**ctx, "recirc_ports": ports, "consume_port": "ig_intr_md.ingress_port + 128",
            "harvest_port": "(PortId_t) (meta.hport - 128)", "recirc_local": _hex(local), "index_shift": None}


_CONST = re.compile(r"^const bit<\d+> (\w+) = [^;]+;\n", re.M)


def _drop_unused_constants(text: str) -> str:
    """Remove ``const`` declarations the program never mentions (p4c warns about them)."""
    used = set(re.findall(r"\b[A-Z][A-Z0-9_]+\b", _CONST.sub("", text)))
    return _CONST.sub(lambda m: m.group(0) if m.group(1) in used else "", text)


def render_p4(plan: Plan) -> str:
    name = "tna.p4.j2" if plan.arch in ("tna", "t2na") else "v1model.p4.j2"
    return _drop_unused_constants(environment().get_template(name).render(**context(plan)))
