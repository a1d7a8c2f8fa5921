"""P4Runtime controller for p4gen programs (installed as ``p4gen.controller``).

Every entity written to a switch is derived from a Plan (IDs, key and
parameter widths, counter indices, register arrays) and a job file:

* :mod:`.errors`   -- the exception classes and the one function that turns
  gRPC / P4Runtime failures into them;
* :mod:`.codec`    -- integers and addresses to P4Runtime bytestrings and back;
* :mod:`.pipeline` -- a build directory (plan, P4Info, device config) and the
  P4Info comparison shared with the software switch's server;
* :mod:`.entities` -- P4Runtime entities named by the plan;
* :mod:`.jobfile`  -- the TOML job file and its validation;
* :mod:`.client`   -- one connection: bounded connect, arbitration, RPCs;
* :mod:`.jobs`     -- push, set up and tear down jobs, counters, register reset;
* :mod:`.bmv2`     -- register reset through BMv2's Thrift CLI;
* :mod:`.cli`      -- ``p4gen ctl ...``.
"""

from .client import SwitchConnection, connect
from .errors import (ArbitrationError, ControllerError, JobConflictError, JobFileError, PipelineError,
                     SwitchError, SwitchUnreachableError, WriteError, translate_rpc_error)
from .jobfile import Job, Worker, load_job, parse_job
from .jobs import Controller
from .pipeline import Build, load_build

__all__ = ["ArbitrationError", "Build", "Controller", "ControllerError", "Job", "JobConflictError", "JobFileError",
           "PipelineError", "SwitchConnection", "SwitchError", "SwitchUnreachableError", "Worker", "WriteError",
           "connect", "load_build", "load_job", "parse_job", "translate_rpc_error"]
