"""Pipeline layouts: how a packet's elements cross the switch, what each layout costs, and the search.

* :mod:`.shape` -- :class:`PassShape` (passes, PHV mode, pipes, stage placement), read by the planner;
* :mod:`.cost` -- the cost model: predicted all-reduce time of a layout for a workload;
* :mod:`.inner` -- register arrays onto MAU stages (exact), with a Z3 certificate;
* :mod:`.search` -- the outer search over layouts and the reference layouts;
* :mod:`.jobs` -- several jobs on one switch: slot and pipe split, controller job files;
* :mod:`.cli` -- ``p4gen plan``.

This package is part of the compiler: it imports the planner, never the switch or host side.
"""
