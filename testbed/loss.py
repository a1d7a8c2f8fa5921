"""Random loss on the host links, with whatever this kernel has.

* netem present: TCLink's own ``loss=`` (both ends of every host link).
* netem absent (``tc ... netem`` fails with "Specified qdisc kind is
  unknown", and ``TCLink(loss=...)`` would print that and carry on with no
  loss): an nftables ``netdev`` table in each host with a drop rule on the
  host's interface, at ``ingress`` (frames the host receives) and
  ``egress`` (frames it sends), or, without ``nft``, iptables
  ``statistic`` rules in the host's INPUT and OUTPUT chains.

A rule on a switch-side port would do nothing: the switch's packet socket
sees a frame before ingress rules do.  Every rule lives in a host's own
namespace, so nothing machine-wide changes.  Link delay needs netem too.
"""

from __future__ import annotations

import shutil
import subprocess
from functools import lru_cache

from .errors import TestbedError

TABLE = "p4gen_loss"


@lru_cache(maxsize=1)
def netem_available() -> bool:
    """Whether the kernel has the netem qdisc (probed in a throw-away namespace)."""
    if shutil.which("unshare") is None or shutil.which("tc") is None:
        return False
    r = subprocess.run(["unshare", "--net", "tc", "qdisc", "add", "dev", "lo", "root", "netem", "delay", "1ms"],
                       capture_output=True, text=True, timeout=10)
    return r.returncode == 0


def method() -> str:
    """``netem``, ``nft`` or ``iptables``: how loss is applied here."""
    if netem_available():
        return "netem"
    if shutil.which("nft"):
        return "nft"
    if shutil.which("iptables"):
        return "iptables"
    raise TestbedError("--loss needs netem, nft or iptables; this machine has none of them "
                       "(Debian packages: nftables, iptables)")


def describe(how: str) -> str:
    return {"netem": "loss: netem on both ends of every host link (TCLink loss=)",
            "nft": "loss: no netem on this kernel; dropping with nft netdev ingress and egress rules "
                   "on each host's interface",
            "iptables": "loss: no netem on this kernel and no nft; dropping with iptables statistic rules "
                        "in each host's INPUT and OUTPUT chains"}[how]


def check_delay(delay: str | None) -> None:
    """A link delay can only be emulated with netem: say so in one line when it is absent."""
    if delay and not netem_available():
        raise TestbedError(f"--delay {delay}: link delay needs the netem qdisc, which this kernel lacks "
                           f"(tc: Specified qdisc kind is unknown); links run without added delay")


def _run(host, argv: list[str], script: str | None = None, check: bool = True) -> None:
    """Run ``argv`` in ``host``'s namespace (``script`` on stdin); a failure is one TestbedError line."""
    p = host.popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    out, _ = p.communicate(script, timeout=20)
    if check and p.returncode != 0:
        msg = (out.strip().splitlines() or ["no message"])[-1]
        raise TestbedError(f"{host.name}: `{' '.join(argv)}` failed with status {p.returncode}: {msg}")


def apply(how: str, host, intf, p: float, link_params: dict) -> None:
    """Loss ``p`` (0..1) in both directions of ``host``'s link (``intf`` is the host's Intf)."""
    if how == "netem":
        pct = 100.0 * p
        for end in (intf, intf.link.intf2 if intf.link.intf1 is intf else intf.link.intf1):
            end.config(**{**link_params, "loss": pct or None})
        return
    if how == "nft":
        _run(host, ["nft", "delete", "table", "netdev", TABLE], check=False)
        if p <= 0:
            return
        cut = int(round(p * 1_000_000))
        rules = [f"add table netdev {TABLE}"]
        for hook in ("ingress", "egress"):
            rules += [f"add chain netdev {TABLE} {hook} {{ type filter hook {hook} device {intf.name} priority 0 ; }}",
                      f"add rule netdev {TABLE} {hook} numgen random mod 1000000 < {cut} counter drop"]
        _run(host, ["nft", "-f", "-"], "\n".join(rules) + "\n")
        return
    for chain in ("INPUT", "OUTPUT"):
        _run(host, ["iptables", "-F", chain])
    if p <= 0:
        return
    prob = f"{p:.6f}"
    for chain, flag in (("OUTPUT", "-o"), ("INPUT", "-i")):
        _run(host, ["iptables", "-A", chain, flag, intf.name, "-m", "statistic", "--mode", "random",
                    "--probability", prob, "-j", "DROP"])
