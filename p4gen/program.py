"""The parts of a Plan that follow from its spec, its target and its layout: the P4 program's headers,
metadata, register arrays, tables, actions and counters, and the fixed numbers of ``params``.

The planner (:func:`p4gen.planner.make_plan`) writes them from these functions, and
:meth:`p4gen.plan.Plan.from_json` checks a plan against the same functions (:func:`expected`), so
that a plan whose P4 program, switch and controller could read one name in two ways -- a parameter
moved, a width changed, a register resized -- is refused wherever it is loaded.  Nothing here is
chosen by a search: what the layout search chooses (the passes, their PHV mode and pipes, the
stages) comes in as arguments.
"""

from __future__ import annotations

import functools
import math
from typing import Any

from . import decision, protocols
from .ops import salu_steps
from .registers import BITMAP_WORD_BITS, Geometry, register_arrays
from .ops.salu import SaluCaps
from .spec import Spec
from .target import TargetProfile
from .wire import pass_header, wire_headers

UDP_PORT_MIN = 0xBEE0
UDP_PORT_MAX = 0xBEEF
EXPONENT_BIAS = 127
SLOT_BITS = 15                      # pool_index = copy(1) . slot(15)
MAX_HEADER_SLOTS = 1 << SLOT_BITS
FLOOD_GROUP_BASE = 0x8000           # flood group for ingress port p is FLOOD_GROUP_BASE + p
PORTS = 512                         # 9-bit ports: one flood group each
RECIRC_PORT = {"tna": 68, "t2na": 6, "v1model": 0}
# the top byte of each kind of object's P4Runtime ID (P4Info's prefixes)
ID_PREFIX = {"actions": 0x01, "tables": 0x02, "counters": 0x12, "registers": 0x16}

METADATA: list[tuple[str, int]] = [
    ("known", 1), ("worker_id", 8), ("word", 8), ("mask", 32), ("num_workers", 32),
    ("slot_base", 16), ("slot_count", 16), ("mgid", 16), ("slot", 16), ("copy", 1),
    ("sc_index", 32), ("vidx", 32), ("cmp", 8), ("seen", 8), ("count", 8), ("values_op", 8),
    ("outcome", 8), ("stat", 8), ("in_port", 16), ("data", 8),
    ("bound", 32),           # two of the job's windows: how far ahead of a copy's chunk a newer tsi may be
    ("room", 16),            # slots of the job's range from the packet's on (0: the slot is past the range)
]
# the fields a Tofino program reads whatever its decision (the rest by the steps it has, see program_metadata)
TNA_METADATA = ("known", "num_workers", "mgid", "slot", "copy", "vidx", "values_op", "outcome", "stat",
                "in_port", "room")


def flood_group_base(profile: TargetProfile) -> int:
    """The first of the per-port flood groups: FLOOD_GROUP_BASE, or the top PORTS group ids below the
    target's multicast group limit."""
    if profile.multicast_group_limit is None:
        return FLOOD_GROUP_BASE
    return min(FLOOD_GROUP_BASE, profile.multicast_group_limit - PORTS)


def register_geometry(spec: Spec, profile: TargetProfile, slots: int, per_pass: int, pass_bits: int,
                      pipes: int) -> Geometry:
    return Geometry(slots, spec.max_workers, spec.value_width, per_pass, profile.lanes_per_register, pass_bits, pipes)


def plan_params(spec: Spec, profile: TargetProfile, slots: int, elements: int, per_pass: int, passes: int,
                mode: str, pipes: int) -> dict[str, Any]:
    """``params`` of a plan laid out as ``passes`` passes of ``per_pass`` values (``mode``, ``pipes``),
    without the codes."""
    return {
        "max_workers": spec.max_workers, "jobs": spec.jobs, "slots": slots, "copies": 2,
        "elements_per_packet": elements, "elements_per_pass": per_pass, "passes": passes,
        "pass_bits": (passes - 1).bit_length(), "pass_mode": mode, "pass_pipes": pipes,
        "value_width": spec.value_width, "lanes": profile.lanes_per_register,
        "bitmap_words": math.ceil(spec.max_workers / BITMAP_WORD_BITS), "bitmap_word_bits": BITMAP_WORD_BITS,
        "slot_bits": SLOT_BITS, "udp_port_min": UDP_PORT_MIN, "udp_port_max": UDP_PORT_MAX,
        "exponent_bias": EXPONENT_BIAS, "flood_group_base": flood_group_base(profile),
        "recirc_port": RECIRC_PORT[profile.arch], "msg_contribution": 0, "msg_result": 1,
    }


def plan_headers(protocol: str, value_width: int, per_pass: int, passes: int, mode: str) -> list[dict[str, Any]]:
    """``headers`` of a plan: the wire headers, the values of a pass (``repeat``: the passes) and, with
    several passes, the internal pass header."""
    headers = [{"name": n, "fields": [{"name": f, "bits": b} for f, b in fields],
                "bytes": sum(b for _, b in fields) // 8} for n, fields in wire_headers(protocol)]
    headers.append({"name": "data", "repeat": passes,
                    "fields": [{"name": f"d{i}", "bits": value_width} for i in range(per_pass)],
                    "bytes": per_pass * value_width // 8})
    if passes > 1:
        name, fields = pass_header(mode)
        headers.append({"name": name, "internal": True, "fields": [{"name": f, "bits": b} for f, b in fields],
                        "bytes": sum(b for _, b in fields) // 8})
    return headers


def program_metadata(profile: TargetProfile, table: decision.DecisionTable, spec: Spec, passes: int,
                     mode: str) -> list[tuple[str, int]]:
    """The program's metadata fields.  On a target with stateful ALUs, the fields the Tofino program
    reads (the compiler drops the others: declaring them would only misstate the PHV), with what the
    decision steps compute around their registers (:mod:`p4gen.ops.salu_steps`); elsewhere the common set.
    Both have one bitmap mask per word and a streamed layout's phase."""
    words = math.ceil(spec.max_workers / BITMAP_WORD_BITS)
    caps = SaluCaps.of(profile)
    if caps is None:
        out = list(METADATA)
    else:
        keep = set(TNA_METADATA) | ({"word", "mask"} if words > 1 else set())
        keep |= {st.yields for st in table.steps if st.yields}
        keep |= {"data"} if protocols.protocol(spec.protocol).sparse else set()
        keep |= {"bound"} if "chunk" in table.roles else set()
        out = [(n, b) for n, b in METADATA if n in keep]
    out += [(f"mask{i}", 32) for i in range(words)]
    if caps is not None and passes > 1:
        out.append(("hport", 16))      # folded passes: this pipe's recirculation port
    if caps is not None:
        have = {n for n, _b in out}
        out += [(n, b) for n, b in _step_fields(table, caps, profile.lanes_per_register, spec.max_workers,
                                                 spec.value_width) if n not in have]
    return out


@functools.lru_cache(maxsize=256)
def _step_fields(table: decision.DecisionTable, caps: SaluCaps, lanes: int, max_workers: int,
                 value_width: int) -> tuple[tuple[str, int], ...]:
    """The metadata the decision steps compute around their registers (:func:`p4gen.ops.salu_steps.fields`):
    the same for every shape of a variant, so the shapes a fit or a layout search weighs share it."""
    g = Geometry(1, max_workers, value_width, lanes, lanes, 0, 1)
    return tuple(salu_steps.fields(salu_steps.program(table, register_arrays(table, g), caps, value_width)))


def program_objects(spec: Spec, op_codes: dict[str, dict[str, int]], table: decision.DecisionTable | None,
                    registers: list[dict[str, Any]], profile: TargetProfile) -> tuple[list, list, list, list]:
    """The P4 program's tables, actions, counters and registers with their P4Runtime IDs: the writable
    tables a controller fills, and the decision ``table`` expanded into ``dt_*`` const entries (none
    when ``table`` is None)."""
    jobs_x_workers = spec.jobs * spec.max_workers
    actions: list[dict[str, Any]] = []
    tables: list[dict[str, Any]] = []

    def action(name, params=(), scope="ingress"):
        a = {"name": name, "scope": scope, "params": [{"name": n, "bits": b} for n, b in params]}
        actions.append(a)
        return name

    set_worker = action("set_worker", [("worker_id", 8), ("word", 8), ("mask", 32), ("num_workers", 32),
                                       ("slot_base", 16), ("slot_count", 16), ("mgid", 16)])
    drop_unknown = action("drop_unknown")
    l2_unicast = action("l2_unicast", [("port", 9)])
    l2_flood = action("l2_flood")
    tables.append({"name": "workers", "scope": "ingress", "size": jobs_x_workers,
                   "keys": [{"name": "job", "field": "agg.job", "bits": 8, "match": "exact"},
                            {"name": "ingress_port", "field": "ingress_port", "bits": 9, "match": "exact"},
                            {"name": "src_addr", "field": "ipv4.src_addr", "bits": 32, "match": "exact"},
                            {"name": "src_port", "field": "udp.src_port", "bits": 16, "match": "exact"}],
                   "actions": [set_worker, drop_unknown], "default_action": drop_unknown, "const": False})
    tables.append({"name": "l2_forward", "scope": "ingress", "size": 1024,
                   "keys": [{"name": "dst_addr", "field": "ethernet.dst_addr", "bits": 48, "match": "exact"}],
                   "actions": [l2_unicast, l2_flood], "default_action": l2_flood, "const": False})
    if table is not None:
        per_array = None
        if profile.is_tna:        # one stateful ALU per action: the bitmap words and value arrays get tables
            per_array = {}
            for r in registers:
                if r["role"] in ("bitmap", "values"):
                    per_array.setdefault(r["role"], []).append(r["name"])
        dt_tables, dt_actions = decision.p4_tables(table, op_codes, per_array)
        actions.extend(dt_actions)
        tables.extend(dt_tables)
    set_dst = action("set_result_dst", [("dst_mac", 48), ("dst_ip", 32), ("dst_port", 16)], scope="egress")
    not_a_result = action("not_a_result", scope="egress")
    tables.append({"name": "result_dst", "scope": "egress", "size": jobs_x_workers,
                   "keys": [{"name": "rid", "field": "egress_rid", "bits": 16, "match": "exact"}],
                   "actions": [set_dst, not_a_result], "default_action": not_a_result, "const": False})

    counters = [{"name": "stats", "scope": "ingress", "size": len(decision.STATS), "unit": "packets_and_bytes",
                 "indices": list(decision.STATS)}]
    p4regs = [{"name": r["name"], "scope": "ingress", "size": r["entries"], "bits": r["entry_bits"]} for r in registers]

    for kind, objs in (("actions", actions), ("tables", tables), ("counters", counters), ("registers", p4regs)):
        for i, obj in enumerate(objs):
            obj["id"] = ID_PREFIX[kind] << 24 | (i + 1)
    return tables, actions, counters, p4regs


def p4names(profile: TargetProfile) -> dict[str, str]:
    """The program's control names and the prefix P4Info and BMv2 put before them."""
    return {"ingress": "P4genIngress", "egress": "P4genEgress", "prefix": "pipe." if profile.is_tna else ""}


def expected_parts(spec: Spec, profile: TargetProfile, variant_table: decision.DecisionTable, *, slots: int,
                   elements: int, passes: int, mode: str, pipes: int) -> dict[str, Any]:
    """What the planner writes for ``spec`` on ``profile`` with ``elements`` values in ``passes`` passes
    (``mode``, ``pipes``), as plan.json holds it: ``params`` (without the codes), ``headers``,
    ``metadata``, ``registers`` (without stages and IDs), the ``tables``, ``actions`` and ``counters``
    besides the decision's ``dt_*`` ones, and ``p4names``; ``<kind>_id_prefix`` for each kind with IDs.
    ``variant_table``: the variant's decision table in the registry (its steps make the registers and
    the metadata)."""
    per_pass = elements // passes
    regs = register_arrays(variant_table, register_geometry(spec, profile, slots, per_pass,
                                                            (passes - 1).bit_length(), pipes))
    tables, actions, counters, _p4regs = program_objects(spec, {}, None, regs, profile)
    return {"params": plan_params(spec, profile, slots, elements, per_pass, passes, mode, pipes),
            "headers": plan_headers(spec.protocol, spec.value_width, per_pass, passes, mode),
            "metadata": [{"name": n, "bits": b} for n, b in program_metadata(profile, variant_table, spec, passes, mode)],
            "registers": regs, "tables": tables, "actions": actions, "counters": counters,
            "p4names": p4names(profile), **{f"{k}_id_prefix": v for k, v in ID_PREFIX.items()}}
