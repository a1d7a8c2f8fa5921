"""p4gen: generate, verify and exercise P4 in-network aggregation pipelines.

This package is the compiler; its public API (imported on first use, so that
``import p4gen`` and a warm ``p4gen build`` stay cheap):

* :func:`make_spec`, :func:`load_spec_file`, :class:`Spec` -- the validated
  request (``p4gen.spec``);
* :func:`load_target`, :func:`load_target_file`, :class:`TargetProfile` --
  target limits (``p4gen.target``);
* :func:`make_plan` -- fit and lay out a spec on a target (``p4gen.planner``)
  into a :class:`Plan`, the IR every consumer reads (``p4gen.plan``);
* :class:`P4genError` -- the root of every error (``p4gen.errors``).

Modules: ``decision`` (the decision tables), ``ops`` (the one definition of
every register operation), ``wire`` (the wire layout of a plan), ``emit``
(P4, P4Info, report), ``build`` (the build and its cache), ``cli``.  The
switch runtime is :mod:`p4gen.switch`, the host side :mod:`p4gen.host`.
"""

from importlib import import_module

__version__ = "0.1.0"

_EXPORTS = {
    "make_spec": "spec", "load_spec_file": "spec", "Spec": "spec",
    "load_target": "target", "load_target_file": "target", "TargetProfile": "target",
    "make_plan": "planner", "Plan": "plan", "P4genError": "errors",
}
__all__ = sorted(_EXPORTS) + ["__version__"]


def __getattr__(name: str):
    if name in _EXPORTS:
        return getattr(import_module(f".{_EXPORTS[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
