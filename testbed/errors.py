"""Testbed failures: one line each, naming what failed and where to look."""

from __future__ import annotations

from p4gen.errors import P4genError


class TestbedError(P4genError):
    """A testbed network, node or job could not be set up or run."""

    __test__ = False          # not a pytest test class despite the name


class PrivilegeError(TestbedError):
    """The testbed needs root and the ip / tc / iptables tools."""


class CommandError(TestbedError):
    """A system command (ip, tc, iptables, ethtool) failed."""


class ReadinessError(TestbedError):
    """A node did not become ready in time; the message names its log file."""


class JobError(TestbedError):
    """An all-reduce job failed: a worker timed out, died or got a wrong result."""
