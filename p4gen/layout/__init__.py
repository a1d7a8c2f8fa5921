"""Pipeline layouts: what each layout costs, and the search for the best one (``p4gen plan``).

A layout is a pass shape (:class:`p4gen.pass_shape.PassShape`: passes, PHV mode, pipes, stage
placement) with a slot count; the planner builds any layout it is given and re-checks it.

* :mod:`.cost` -- the cost model: predicted all-reduce time of a layout for a workload;
* :mod:`.inner` -- register arrays onto MAU stages (exact), with a Z3 certificate;
* :mod:`.search` -- the outer search over layouts and the reference layouts;
* :mod:`.job_split` -- several jobs on one switch: slot and pipe split; :mod:`.job_split_cli` reads the
  jobs file and writes their controller job files;
* :mod:`.workload_args` -- the workload options ``p4gen plan`` and ``p4gen build --layout best`` share;
* :mod:`.layoutfile` -- the layout file ``p4gen plan`` writes and ``p4gen build --layout`` reads;
* :mod:`.cli` -- ``p4gen plan``.

This package is part of the compiler: it imports the planner, never the switch or host side, and the
planner never imports it.
"""
