"""P4Info (text format) for a Plan.

Every ID comes from the Plan and is pinned in the P4 source with an
``@id`` annotation, so the P4Info written here and the one p4c produces
for the same program agree on IDs and names.
"""

from __future__ import annotations

from google.protobuf import text_format
from p4.config.v1 import p4info_pb2

from ..p4runtime.ids import numbered
from ..plan import Plan


def build_p4info(plan: Plan) -> p4info_pb2.P4Info:
    names = plan.p4names

    def preamble(entity, item, scope: str) -> None:
        entity.preamble.id = item.id
        entity.preamble.name = names.qualified(scope, item.name)
        entity.preamble.alias = item.name

    info = p4info_pb2.P4Info()
    info.pkg_info.arch = plan.arch
    info.pkg_info.name = f"p4gen-{plan.protocol}-{plan.variant}"
    info.pkg_info.version = plan.generator.version
    actions = {a.name: a for a in plan.actions}
    for t in plan.tables:
        pt = info.tables.add()
        preamble(pt, t, t.scope)
        for i, k in numbered(t.keys):
            mf = pt.match_fields.add()
            mf.id = i
            mf.name = k.name
            mf.bitwidth = k.bits
            mf.match_type = p4info_pb2.MatchField.EXACT
        for a in t.actions:
            ref = pt.action_refs.add()
            ref.id = actions[a].id
        pt.const_default_action_id = actions[t.default_action].id
        pt.size = t.size
        if t.const:
            pt.is_const_table = True
    for a in plan.actions:
        pa = info.actions.add()
        preamble(pa, a, a.scope)
        for i, prm in numbered(a.params):
            pp = pa.params.add()
            pp.id = i
            pp.name = prm.name
            pp.bitwidth = prm.bits
    for cnt in plan.counters:
        pc = info.counters.add()
        preamble(pc, cnt, cnt.scope)
        pc.spec.unit = p4info_pb2.CounterSpec.BOTH
        pc.size = cnt.size
    for r in plan.registers:
        pr = info.registers.add()
        preamble(pr, r, "ingress")
        pr.type_spec.bitstring.bit.bitwidth = r.entry_bits
        pr.size = r.entries
    return info


def render_p4info(plan: Plan) -> str:
    return text_format.MessageToString(build_p4info(plan))
