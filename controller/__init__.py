"""P4Runtime controller for p4gen programs (installed as ``p4gen.controller``).

Every entity written to a switch is derived from a Plan (IDs, key and
parameter widths, counter indices, register arrays) and a job file:

* :mod:`.errors`   -- the exception classes and the one function that turns
  gRPC / P4Runtime failures into them;
* :mod:`.pipeline` -- a build directory (plan, P4Info, device config);
* :mod:`.entities` -- P4Runtime entities named by the plan;
* :mod:`.client`   -- one connection: bounded connect, arbitration, RPCs;
* :mod:`.job_control` -- push, set up and tear down jobs, counters, register reset;
* :mod:`.bmv2`     -- register reset through BMv2's Thrift CLI;
* :mod:`.cli`      -- ``p4gen ctl ...``.

What the controller shares with the software switch's P4Runtime server (the
value codec, the status details of a failed Write, the P4Info comparison)
lives in :mod:`p4gen.p4runtime`; the job file is :mod:`p4gen.jobfile`.  This
package depends on ``p4gen``; nothing in ``p4gen`` but the ``p4gen ctl``
dispatch depends on it.
"""

from p4gen.jobfile import Job, Worker, load_job, parse_job

from .client import SwitchConnection, connect
from .errors import (ArbitrationError, ControllerError, JobConflictError, JobFileError, PipelineError,
                     SwitchError, SwitchUnreachableError, WriteError, translate_rpc_error)
from .job_control import Controller
from .pipeline import Build, load_build

__all__ = ["ArbitrationError", "Build", "Controller", "ControllerError", "Job", "JobConflictError", "JobFileError",
           "PipelineError", "SwitchConnection", "SwitchError", "SwitchUnreachableError", "Worker", "WriteError",
           "connect", "load_build", "load_job", "parse_job", "translate_rpc_error"]
