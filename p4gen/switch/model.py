"""Executable semantics of a Plan: the software data plane's switch model.

:class:`SwitchModel` is the switch of one Plan: the state a P4Runtime
server would hold (registers, table entries, multicast groups, counters),
one frame at a time with :meth:`SwitchModel.process` and batches of frames
with :meth:`SwitchModel.process_batch`, :meth:`SwitchModel.process_matrix`
and :meth:`SwitchModel.process_groups`.

The per-packet aggregation decision is *read from the plan*
(``plan.decision``, or a table passed as ``decision=``): nothing
here knows which operation follows which observation.  Two executions of
that table exist:

* ``fast=False`` (:meth:`.DecisionProgram.decide_reference`): for every
  step, ``decision.lookup(step.rules, observations)`` picks the operation and
  ``p4gen.ops`` (``chunk_op``, ``bitmap_op``, ``counter_op``,
  ``exponent_op``, ``values_op``) executes it, exactly as written there.
* ``fast=True`` (default, :attr:`.DecisionProgram.decide`): at construction
  every step is expanded with ``decision.expand`` into a dict ``observation
  codes -> kernel``, and the outcome into ``codes -> (action, stat)``.  The
  kernels, and the statements of the batch path's generated loop
  (:class:`.DecisionLoop`), are derived from ``p4gen.ops`` by :mod:`.kernels`
  (the ops functions run over an algebra of Python expressions), so no
  operation is written a second time; ``tests/test_model_fastpath.py`` checks
  each kernel against ``p4gen.ops`` and both executions against each other,
  ``tests/test_ops_derivation.py`` that a change in ``p4gen.ops`` moves every
  path.

The model is composed of parts, each an object with its own interface that
takes the parts it uses in its constructor (none uses another's private
attributes; ``tests/test_switch_parts.py`` checks it):

* :class:`.SwitchState` (:mod:`.state`): registers, tables, groups,
  counters, config -- what a P4Runtime server reads and writes;
* :class:`.DecisionProgram` (:mod:`.decider`): the decision table compiled
  against that state, fast and by reference;
* :class:`.PacketPath` (:mod:`.interpreter`): one frame -- parse, admit,
  decide, emit;
* :class:`.BatchPath` (:mod:`.batch`): the vectorised batches, with its own
  helpers :class:`.WorkerLookup` (:mod:`.batch_workers`),
  :class:`.BatchValues` (:mod:`.batch_values`), :class:`.BatchEmitter`
  (:mod:`.batch_emit`) and :class:`.DecisionLoop` (:mod:`.decision_loop`).

:class:`.FrameFields` and :class:`.FrameRecords` (:mod:`.fields`) describe
the header layout both paths read; :mod:`.kernels` holds the operation
kernels and :mod:`.job_config` the job-setup helper.  ``SwitchModel``
itself only builds the parts and forwards its public methods to them.

Value registers are one numpy array per plan (column = element index, as
given by each ``values{j}`` register's ``elements``); the per-packet value
work is one vectorised numpy operation.  Scalar registers (chunk, bitmap
words, counter, exponent) are kept as Python lists, which are faster than
numpy scalars per packet; :meth:`register_read` returns numpy arrays.
"""


from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable, Mapping

import numpy as np

from ..decision import DecisionTable
from ..plan import Plan
from ..wire import FrameLayout
from .batch import VEC_MIN_BATCH, BatchPath
from .decider import DecisionProgram
from .fields import FrameFields
from .interpreter import PacketPath
from .job_config import WorkerAddr, job_config
from .kernels import FAST_KERNELS, derive
from .state import ModelError, SwitchState

__all__ = ["FAST_KERNELS", "ModelError", "SwitchModel", "VEC_MIN_BATCH", "WorkerAddr", "job_config"]


class SwitchModel:
    """The switch of one Plan: registers, tables, groups, counters, ``process`` and the batch paths.

    Its parts are public: :attr:`state` (:class:`.SwitchState`),
    :attr:`program` (:class:`.DecisionProgram`), :attr:`packet_path`
    (:class:`.PacketPath`) and :attr:`batch_path` (:class:`.BatchPath`).
    The packet methods are the paths' own bound methods (set per instance,
    so a frame pays no extra call); the control-plane methods forward to
    :attr:`state`.
    """

    def __init__(self, plan: Plan | str | Path, decision: DecisionTable | Mapping[str, Any] | None = None,
                 fast: bool = True):
        if isinstance(plan, (str, Path)):
            plan = Plan.load(plan)
        self.plan = plan
        self.params = plan.params
        self.codes = plan.codes
        self.layout = FrameLayout(plan)
        if decision is None:
            table = plan.decision
        elif isinstance(decision, DecisionTable):
            table = decision
        else:
            try:
                table = DecisionTable.from_dict(decision, plan.protocol)
            except (ValueError, LookupError, KeyError, TypeError) as exc:
                raise ModelError(f"decision table is invalid: {exc}") from None
        kernels = derive()            # the operations of p4gen.ops as they are now, as code
        roles = set(table.roles) - set(kernels.fast)
        if roles:
            raise ModelError(f"the model does not implement register role(s) {', '.join(sorted(roles))} "
                             f"(protocol {plan.protocol!r})")
        self.decision = table
        self.fast = fast
        self.state = SwitchState(plan, self.layout)
        fields = FrameFields(self.layout, plan.params, plan.codes, self.state.worker_key_fields)
        self.program = DecisionProgram(table, plan.codes, self.layout, self.state, kernels)
        self.packet_path = PacketPath(self.layout, fields, self.state, self.program, fast)
        self.batch_path = BatchPath(self.layout, fields, self.state, self.program, self.packet_path, kernels, fast)
        # the packet entry points, bound once per instance: no forwarding call per frame or batch
        self.process = self.packet_path.process
        self.process_batch = self.batch_path.process_batch
        self.process_matrix = self.batch_path.process_matrix
        self.process_groups = self.batch_path.process_groups

    # ------------------------------------------------------------------ packets
    # (documented here; each instance holds the parts' bound methods under these names)
    def process(self, frame: bytes, ingress_port: int) -> list[tuple[int, bytes]]:
        """One frame in on ``ingress_port``; the frames out as (egress_port, bytes)
        (:meth:`.PacketPath.process`)."""
        return self.packet_path.process(frame, ingress_port)

    def process_batch(self, packets) -> list[list[tuple[int, bytes]]]:
        """Frames (frame, ingress port) in order, as :meth:`process` would one by one; one output list per
        frame (:meth:`.BatchPath.process_batch`)."""
        return self.batch_path.process_batch(packets)

    def process_matrix(self, A8: np.ndarray, ports: np.ndarray) -> list[tuple[int, np.ndarray]]:
        """The rows of the byte matrix ``A8`` in on ``ports``; each egress port's frames as a byte matrix
        (:meth:`.BatchPath.process_matrix`)."""
        return self.batch_path.process_matrix(A8, ports)

    def process_groups(self, groups, B: int) -> list[tuple[int, np.ndarray]]:
        """A round of frames of several lengths, per length (byte matrix, ports, positions); each egress
        port's frames as byte matrices (:meth:`.BatchPath.process_groups`)."""
        return self.batch_path.process_groups(groups, B)

    @property
    def entry_trace(self) -> list[tuple[str, tuple]] | None:
        """With ``fast=False``: set a list here and every decision appends the dt_* entries it takes
        (:attr:`.DecisionProgram.entry_trace`); None (the default) records nothing."""
        return self.program.entry_trace

    @entry_trace.setter
    def entry_trace(self, trace: list[tuple[str, tuple]] | None) -> None:
        self.program.entry_trace = trace

    # ------------------------------------------------------------------ control plane (SwitchState)
    @property
    def stat_names(self) -> list[str]:
        """The ``stats`` counter's index names, in index order."""
        return self.state.stat_names

    @property
    def groups(self) -> dict[int, list[tuple[int, int]]]:
        """Multicast groups: mgid -> [(egress port, rid)]."""
        return self.state.groups

    @property
    def stats(self) -> dict[str, int]:
        """Packets per stats index."""
        return self.state.stats

    def register_names(self) -> list[str]:
        return self.state.register_names()

    def register_read(self, name: str) -> np.ndarray:
        """The register's contents: shape (entries,) for one lane, (entries, lanes) otherwise."""
        return self.state.register_read(name)

    def register_write(self, name: str, index: int, value) -> None:
        self.state.register_write(name, index, value)

    def register_reset(self, name: str | None = None) -> None:
        """Zero one register (or all of them)."""
        self.state.register_reset(name)

    def insert(self, table: str, match: Mapping[str, Any], action: str,
               params: Mapping[str, Any] | None = None) -> None:
        self.state.insert(table, match, action, params)

    def modify(self, table: str, match: Mapping[str, Any], action: str,
               params: Mapping[str, Any] | None = None) -> None:
        self.state.modify(table, match, action, params)

    def delete(self, table: str, match: Mapping[str, Any]) -> None:
        self.state.delete(table, match)

    def holds(self, table: str, match: Mapping[str, Any]) -> bool:
        """Whether ``table`` has an entry for ``match`` (without listing the table)."""
        return self.state.holds(table, match)

    def size(self, table: str) -> int:
        return self.state.size(table)

    def read(self, table: str) -> list[dict[str, Any]]:
        return self.state.read(table)

    def worker_ports(self) -> dict[tuple[int, int], int]:
        """(source IPv4 address, source UDP port) -> ingress port of every ``workers`` entry."""
        return self.state.worker_ports()

    def set_group(self, mgid: int, replicas: Iterable[tuple[int, int]]) -> None:
        """Create or replace multicast group ``mgid`` with (egress_port, rid) replicas."""
        self.state.set_group(mgid, replicas)

    def delete_group(self, mgid: int) -> None:
        self.state.delete_group(mgid)

    def counter_reset(self) -> None:
        self.state.counter_reset()

    def counter_read(self, name: str = "stats") -> dict[str, tuple[int, int]]:
        return self.state.counter_read(name)

    def load_config(self, cfg: Mapping[str, Any] | str | Path) -> None:
        """Apply a control-plane config: {"tables": {name: [entry...]}, "groups": {mgid: [[port, rid]...]}}
        (:meth:`.SwitchState.load_config`)."""
        self.state.load_config(cfg)

    def dump_config(self) -> dict[str, Any]:
        return self.state.dump_config()
