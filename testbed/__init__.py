"""The testbed: Mininet networks with p4gen's switch, worker emulators and the Gloo baseline.

The names below are the public API (imported on first use, so that ``p4gen``'s
command line stays fast):

* :class:`Network` (:mod:`.net`): ``Mininet(topo, switch=..., controller=None, link=TCLink)`` as a
  context manager;
* :class:`StarTopo`, :class:`TwoLevelTopo`, :class:`DataTopo` (:mod:`.mntopo`): Mininet topologies;
* :class:`SoftSwitch`, :class:`BMv2Switch`, :class:`Leaf` (:mod:`.nodes`): the switches;
* :func:`build_plan` (:mod:`.plans`): the build a switch runs;
* :func:`run_switchml`, :func:`run_gloo` (:mod:`.harness`): one measured, checked all-reduce.
"""

from importlib import import_module

_API = {"Network": "net", "StarTopo": "mntopo", "TwoLevelTopo": "mntopo", "DataTopo": "mntopo",
        "SoftSwitch": "nodes", "BMv2Switch": "nodes", "Leaf": "nodes", "build_plan": "plans",
        "run_switchml": "harness", "run_gloo": "harness"}

__all__ = sorted(_API)


def __getattr__(name: str):
    if name in _API:
        return getattr(import_module(f".{_API[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
