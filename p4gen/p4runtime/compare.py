"""Two P4Infos compared by ID and shape (key and parameter widths, sizes).

The software switch's P4Runtime server uses :func:`p4info_diff` to refuse a foreign pipeline; the
controller uses it to refuse to program a switch that runs another program than its plan describes.
"""

from __future__ import annotations

from p4.config.v1 import p4info_pb2


def _shape(info: p4info_pb2.P4Info) -> dict[str, dict[int, tuple[str, tuple]]]:
    """kind -> id -> (name, shape) for the objects the controller writes or reads."""
    out: dict[str, dict[int, tuple[str, tuple]]] = {"table": {}, "action": {}, "counter": {}, "register": {}}
    for t in info.tables:
        keys = tuple((m.name, m.bitwidth, m.match_type) for m in t.match_fields)
        out["table"][t.preamble.id] = (t.preamble.name, (("keys", keys),
                                                         ("actions", tuple(sorted(a.id for a in t.action_refs))),
                                                         ("size", t.size)))
    for a in info.actions:
        out["action"][a.preamble.id] = (a.preamble.name, (("params", tuple((p.name, p.bitwidth) for p in a.params)),))
    for c in info.counters:
        out["counter"][c.preamble.id] = (c.preamble.name, (("size", c.size), ("unit", c.spec.unit)))
    for r in info.registers:
        out["register"][r.preamble.id] = (r.preamble.name, (("size", r.size),
                                                            ("bits", r.type_spec.bitstring.bit.bitwidth)))
    return out


def _describe(field: str, value) -> str:
    if field == "keys":
        return "keys " + (", ".join(f"{n}:{b}" for n, b, _ in value) or "none")
    if field == "params":
        return "params " + (", ".join(f"{n}:{b}" for n, b in value) or "none")
    if field == "actions":
        return "action ids " + ",".join(str(a) for a in value)
    return f"{field} {value}"


def p4info_diff(expected: p4info_pb2.P4Info, actual: p4info_pb2.P4Info, strict: bool = True,
                ref: str = "the plan") -> str | None:
    """The first difference between two P4Infos (by ID and shape), or None.

    With ``strict=False`` (``actual`` comes from p4c), objects that only ``actual`` has are allowed
    (p4c adds a few the plan does not list), and the size of a table ``expected`` marks const is not
    compared.  ``ref`` names ``expected`` in the message.
    """
    want, got = _shape(expected), _shape(actual)
    # a const table's entries are fixed by the program, which declares no size for it: p4c gives it
    # its default size (1024), and the controller never writes into it
    fixed = set() if strict else {t.preamble.id for t in expected.tables if t.is_const_table}
    for kind in ("table", "action", "counter", "register"):
        for oid, (name, shape) in sorted(want[kind].items()):
            if oid not in got[kind]:
                return f"it lacks {kind} {name} (id {oid})"
            for (field, w), (_f, g) in zip(shape, got[kind][oid][1]):
                if kind == "table" and field == "size" and oid in fixed:
                    continue
                if w != g:
                    return f"{kind} {name} (id {oid}) has {_describe(field, g)}; {ref} has {_describe(field, w)}"
        if strict:
            extra = sorted(set(got[kind]) - set(want[kind]))
            if extra:
                return f"it has {kind} {got[kind][extra[0]][0]} (id {extra[0]}), which {ref} lacks"
    return None
