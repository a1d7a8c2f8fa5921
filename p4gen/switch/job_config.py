"""Job setup: the control-plane config of one job's workers."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..plan import Plan


@dataclass(frozen=True)
class WorkerAddr:
    port: int          # switch port the worker is attached to
    mac: int
    ip: int
    udp_port: int


def job_config(plan: Plan, job: int, workers: list[WorkerAddr], *, slot_base: int = 0,
               slot_count: int | None = None, mgid: int = 1, rid_base: int = 1) -> dict[str, Any]:
    """Control-plane config (for :meth:`SwitchModel.load_config`) of one job.

    Worker i gets bit i % 32 of word i // 32; the job's results are multicast
    to group ``mgid`` whose replica for worker i has rid ``rid_base + i``,
    which ``result_dst`` maps to the worker's addresses.
    """
    count = plan.params.slots - slot_base if slot_count is None else slot_count
    word_bits = plan.params.bitmap_word_bits
    tables: dict[str, list] = {"workers": [], "result_dst": []}
    reps = []
    for i, w in enumerate(workers):
        tables["workers"].append({
            "match": {"job": job, "ingress_port": w.port, "src_addr": w.ip, "src_port": w.udp_port},
            "action": "set_worker",
            "params": {"worker_id": i, "word": i // word_bits, "mask": 1 << (i % word_bits),
                       "num_workers": len(workers), "slot_base": slot_base, "slot_count": count, "mgid": mgid}})
        tables["result_dst"].append({"match": {"rid": rid_base + i}, "action": "set_result_dst",
                                     "params": {"dst_mac": w.mac, "dst_ip": w.ip, "dst_port": w.udp_port}})
        reps.append([w.port, rid_base + i])
    return {"tables": tables, "groups": {str(mgid): reps}}
