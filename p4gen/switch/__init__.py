"""The switch runtime: the software data plane that executes a Plan.

Public API (imported on first use, so that ``import p4gen.switch`` costs
nothing):

* :class:`SwitchModel` (``p4gen.switch.model``), :class:`ModelError`
  (``p4gen.switch.state``) -- the switch state, its control API and the
  packet paths; the model is a facade over parts, one object and module
  per job: ``SwitchState`` in ``state`` (registers, tables, groups,
  counters, config), ``DecisionProgram`` in ``decider`` (the decision table
  compiled), ``PacketPath`` in ``interpreter`` (one frame), ``BatchPath`` in
  ``batch`` with ``batch_workers``, ``batch_values``, ``batch_emit`` and
  ``decision_loop`` (``process_batch``), ``fields`` (where each header
  field is) and ``kernels`` (the register operations as executable code);
* :class:`WorkerAddr`, :func:`job_config` -- one job's control-plane config
  (``p4gen.switch.job_config``);
* :class:`DataPlane`, :class:`DataPlaneError` -- the model on AF_PACKET
  ports (``p4gen.switch.dataplane``; run it with
  ``python -m p4gen.switch.dataplane``);
* :class:`P4RuntimeServer`, :func:`serve` -- its P4Runtime server
  (``p4gen.switch.p4rt_server``).

This package reads the compiler's output (``p4gen.plan``, ``p4gen.decision``,
``p4gen.ops``, ``p4gen.wire``) and never the host side.
"""

from importlib import import_module

_EXPORTS = {
    "SwitchModel": "model", "ModelError": "state", "WorkerAddr": "job_config", "job_config": "job_config",
    "DataPlane": "dataplane", "DataPlaneError": "dataplane",
    "P4RuntimeServer": "p4rt_server", "serve": "p4rt_server",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name in _EXPORTS:
        return getattr(import_module(f".{_EXPORTS[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
