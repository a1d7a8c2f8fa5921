"""Executable semantics of a Plan: the software data plane's switch model.

:class:`SwitchModel` holds the plan's registers, the control-plane state a
P4Runtime server would hold (table entries, multicast groups, counters)
and processes one frame at a time with :meth:`SwitchModel.process`.

The per-packet aggregation decision is *read from the plan*
(``plan.decision``, or a table passed as ``decision=``): nothing
here knows which operation follows which observation.  Two executions of
that table exist:

* ``fast=False`` (:meth:`SwitchModel._decide_reference`): for every step,
  ``decision.lookup(step.rules, observations)`` picks the operation and
  ``p4gen.ops`` (``chunk_op``, ``bitmap_op``, ``counter_op``,
  ``exponent_op``, ``values_op``) executes it, exactly as written there.
* ``fast=True`` (default, :meth:`SwitchModel._decide_fast`): at construction
  :meth:`SwitchModel._compile_fast` expands every step with
  ``decision.expand`` into a dict ``observation codes -> kernel``, and the
  outcome into ``codes -> (action, stat)``.  The kernels, and the statements
  of the batch path's generated loop, are derived from ``p4gen.ops`` by
  :mod:`.kernels` (the ops functions run over an algebra of Python
  expressions), so no operation is written a second time;
  ``tests/test_model_fastpath.py`` checks each kernel against ``p4gen.ops``
  and both executions against each other, ``tests/test_ops_derivation.py``
  that a change in ``p4gen.ops`` moves every path.

The class is assembled from one mixin per job: :mod:`.state` (registers,
tables, groups, counters, config), :mod:`.interpreter` (one frame),
:mod:`.decider` (the decision table as code), :mod:`.batch` with
:mod:`.batch_workers`, :mod:`.batch_values` and :mod:`.batch_emit` (the
vectorised ``process_batch``); :mod:`.kernels` holds the operation kernels
and :mod:`.job_config` the job-setup helper.

Value registers are one numpy array per plan (column = element index, as
given by each ``values{j}`` register's ``elements``); the per-packet value
work is one vectorised numpy operation.  Scalar registers (chunk, bitmap
words, counter, exponent) are kept as Python lists, which are faster than
numpy scalars per packet; :meth:`register_read` returns numpy arrays.
"""


from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

from ..decision import DecisionTable
from ..plan import Plan
from ..wire import FrameLayout
from .batch import VEC_MIN_BATCH, BatchExecutor
from .batch_emit import BatchEmitter
from .batch_values import BatchValues
from .batch_workers import BatchWorkers
from .decider import Decider
from .interpreter import PacketInterpreter
from .job_config import WorkerAddr, job_config
from .kernels import FAST_KERNELS, derive
from .state import ModelError, SwitchState

__all__ = ["FAST_KERNELS", "ModelError", "SwitchModel", "VEC_MIN_BATCH", "WorkerAddr", "job_config"]


class SwitchModel(SwitchState, PacketInterpreter, Decider, BatchExecutor, BatchValues, BatchWorkers,
                  BatchEmitter):
    """The switch of one Plan: registers, tables, groups, counters and ``process``."""

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
        self._kernels = derive()            # the operations of p4gen.ops as they are now, as code
        roles = set(table.roles) - set(self._kernels.fast)
        if roles:
            raise ModelError(f"the model does not implement register role(s) {', '.join(sorted(roles))} "
                             f"(protocol {plan.protocol!r})")
        self.decision = table
        self.fast = fast
        # fast=False: a list here records the dt_* entry every step takes (see Decider._decide_reference)
        self.entry_trace: list[tuple[str, tuple]] | None = None
        self.stat_names = list(plan.stats)
        self._stat = {n: i for i, n in enumerate(self.stat_names)}
        # agg_rx (every accepted aggregation packet) is counted only by plans whose counter has it
        self._agg_rx = self._stat.get("agg_rx")
        self._init_registers(plan.registers)
        self._init_tables(plan)
        self.groups: dict[int, list[tuple[int, int]]] = {}
        self.counter_reset()
        self._init_fields()
        if table.step("minnext") is not None and self._minnext is None:
            raise ModelError("the decision table has a minnext step but the plan has no minnext register")
        if not self._omni and any("data" in st.keys for st in table.steps + (table.outcome,)):
            raise ModelError("the decision table observes 'data', which only an omnireduce plan's parser provides")
        self._compile_fast()
        self._init_vec()

