"""A network namespace of a test's own, with veth pairs inside it, removed afterwards."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import uuid

import pytest


def sh(*args, check=True):
    return subprocess.run(args, check=check, capture_output=True, text=True)


@contextlib.contextmanager
def veth_namespace(pairs: list[tuple[str, str]]):
    """Yield the name of a new namespace (``p4gtest-*``, IPv6 off, lo up) holding the veth ``pairs``, all up;
    skip the test where namespaces cannot be made."""
    if os.geteuid() != 0:
        pytest.skip("needs root for network namespaces")
    if not shutil.which("ip"):
        pytest.skip("iproute2 'ip' is not installed")
    ns = f"p4gtest-{uuid.uuid4().hex[:8]}"
    try:
        sh("ip", "netns", "add", ns)
    except subprocess.CalledProcessError as exc:
        pytest.skip(f"cannot create a network namespace: {exc.stderr.strip()}")
    try:
        for k in ("all", "default"):
            sh("ip", "netns", "exec", ns, "sysctl", "-qw", f"net.ipv6.conf.{k}.disable_ipv6=1", check=False)
        sh("ip", "-n", ns, "link", "set", "lo", "up")
        for a, b in pairs:
            sh("ip", "-n", ns, "link", "add", a, "type", "veth", "peer", "name", b)
            sh("ip", "-n", ns, "link", "set", a, "up")
            sh("ip", "-n", ns, "link", "set", b, "up")
        yield ns
    finally:
        sh("ip", "netns", "del", ns, check=False)
