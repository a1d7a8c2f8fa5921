"""One exception hierarchy for every user-facing failure.

Every message is a single line that names what was asked, the limit it
breaks and, where one exists, the largest value that fits.  The CLI prints
``str(exc)`` and exits non-zero; library code never calls ``sys.exit``.
"""


class P4genError(ValueError):
    """Root of all p4gen errors (a ``ValueError``, as callers expect)."""


class SpecError(P4genError):
    """A spec field is missing, of the wrong type or out of its legal range."""


class TargetError(P4genError):
    """A target profile is unknown or malformed."""


class InfeasibleError(P4genError):
    """A valid spec does not fit the target's resources."""


class PlanError(P4genError):
    """A plan.json is unreadable, of another schema version, or inconsistent."""


class OutputError(P4genError):
    """An output directory cannot be written safely."""


class CompileError(P4genError):
    """An external P4 compiler rejected a generated program."""
