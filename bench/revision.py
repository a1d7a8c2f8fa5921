"""The in-process model figures of bench/model.py for an earlier git revision and for this checkout,
measured in one run: ``python bench/model.py --before REV [--quick]``.

REV is exported from git (``git archive``) into a temporary directory, laid
out as its pyproject.toml's package-dir maps it (templates/ becomes
p4gen/templates, ...), as an install would.  Two child processes run the
measurements: one imports p4gen from that directory (the editable
install's finder removed, so nothing of this checkout leaks in), the other
this checkout's p4gen.  Both run bench/model.py's own frames and models
(this checkout's bench code, so REV needs p4gen.switch and p4gen.host:
a9b7c6d or later).  For every configuration the two take turns, REPEATS
runs each on a fresh model, and the fastest of each counts, in CPU time
(``time.process_time``: the machine is shared, and the time it gives other
processes does not count); the ratio is after / before packets per
second.  Both must also agree on the outcome (frames, packets absorbed and
multicast).
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import tarfile
import tempfile
import time
import tomllib
from pathlib import Path

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
REPEATS = 5
MODES = ("process", "batch64", "batch256", "batch1024")
TOLERANCE = 0.10

# A measuring child: argv[1] is the exported tree ('' for this checkout's installed p4gen).
CHILD = r"""
import sys
tree = sys.argv[1]
if tree:
    sys.meta_path[:] = [f for f in sys.meta_path if not getattr(f, "__module__", "").startswith("__editable__")]
    sys.path.insert(0, tree)
sys.path.insert(0, sys.argv[2])
import revision
revision.serve()
"""


def _git(*args: str) -> bytes:
    return subprocess.run(["git", "-C", str(REPO), *args], check=True, capture_output=True).stdout


def describe(rev: str) -> str:
    return _git("log", "-1", "--format=%h %s", rev).decode().strip()


def export(rev: str, dest: Path) -> Path:
    """``rev``'s packages under ``dest``, as its pyproject's package-dir lays them out."""
    pyproject = tomllib.loads(_git("show", f"{rev}:pyproject.toml").decode())
    dirs = pyproject["tool"]["setuptools"].get("package-dir", {"p4gen": "p4gen"})
    with tempfile.TemporaryFile() as fh:
        fh.write(_git("archive", "--format=tar", rev, *sorted(set(dirs.values()))))
        fh.seek(0)
        with tarfile.open(fileobj=fh) as tar:
            tar.extractall(dest / "src", filter="data")
    for package, folder in sorted(dirs.items()):         # parents ("p4gen") before their children
        (dest / "src" / folder).rename(dest / package.replace(".", "/"))
    return dest


# -- child side -----------------------------------------------------------------------

def serve() -> None:
    """Answer one JSON request a line: {"epp", "n", "mode", "total"} -> {"pps" (frames per second of
    CPU time), "frames", "absorbed", "multicast"} of one run on a fresh model (bench/model.py's
    _rate); the first line says where p4gen came from."""
    import p4gen
    import model as M

    print(json.dumps({"p4gen": str(Path(p4gen.__file__).parent)}), flush=True)
    plans: dict = {}
    frames: dict = {}
    for line in sys.stdin:
        q = json.loads(line)
        epp, n = q["epp"], q["n"]
        if epp not in plans:
            plans[epp] = M.make_plan(M.make_spec(slots=64, elements_per_packet=epp, variant="hardened"),
                                     M.load_target("bmv2"))
        plan = plans[epp]
        if (epp, n) not in frames:
            frames[(epp, n)] = M.frames_for(plan, n, max(2, q["total"] // n), 64)
        pps, m = M._rate(plan, n, frames[(epp, n)], q["mode"], repeats=1, clock=time.process_time)
        print(json.dumps({"pps": pps, "frames": len(frames[(epp, n)]), "absorbed": m.stats["absorbed"],
                          "multicast": m.stats["multicast"]}), flush=True)


# -- parent side ----------------------------------------------------------------------

class _Child:
    def __init__(self, tree: Path | None):
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        self.proc = subprocess.Popen([sys.executable, "-c", CHILD, str(tree or ""), str(BENCH)], env=env,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.where = self._read()["p4gen"]

    def _read(self) -> dict:
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError("a measuring process ended early (its error is above)")
        return json.loads(line)

    def run(self, **q) -> dict:
        self.proc.stdin.write(json.dumps(q) + "\n")
        self.proc.stdin.flush()
        return self._read()

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait(30)


def _load() -> str:
    return "load average {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()) + f" on {os.cpu_count()} cores"


def compare(rev: str, quick: bool) -> int:
    total = 4096 if quick else 16384
    with tempfile.TemporaryDirectory(prefix="p4gen-before-") as tmp:
        before_desc = describe(rev)
        children = {"before": _Child(export(rev, Path(tmp))), "after": _Child(None)}
        try:
            print(f"model in-process, before = {before_desc} (p4gen from {children['before'].where}), "
                  f"after = this checkout, HEAD {describe('HEAD')} (p4gen from {children['after'].where})")
            print(f"each figure: packets per second of CPU time (the process's, so that time the machine gives "
                  f"other work does not count), the fastest of {REPEATS} runs on a fresh model, the two taking "
                  f"turns; {total} frames per run; {_load()}")
            print(f"{'elements':>8} {'workers':>7} {'mode':>10} {'before':>10} {'after':>10} {'after/before':>12}")
            ratios: dict[str, list[float]] = {m: [] for m in MODES}
            for epp in (64, 256):
                for n in (2, 4, 8, 16, 32):
                    for mode in MODES:
                        pps = {"before": 0.0, "after": 0.0}
                        outcome = {}
                        for rep in range(REPEATS):
                            for side in (("before", "after") if rep % 2 == 0 else ("after", "before")):
                                r = children[side].run(epp=epp, n=n, mode=mode, total=total)
                                pps[side] = max(pps[side], r["pps"])
                                outcome[side] = (r["frames"], r["absorbed"], r["multicast"])
                        if outcome["before"] != outcome["after"]:
                            raise RuntimeError(f"{epp} elements, n={n}, {mode}: before (frames, absorbed, multicast) "
                                               f"{outcome['before']}, after {outcome['after']}")
                        ratios[mode].append(pps["after"] / pps["before"])
                        print(f"{epp:>8} {n:>7} {mode:>10} {pps['before']:>10,.0f} {pps['after']:>10,.0f} "
                              f"{ratios[mode][-1]:>11.2f}x")
        finally:
            for c in children.values():
                c.close()
    print(f"after / before per mode, geometric mean over the 10 configurations (lowest, highest); {_load()}")
    every = []
    for mode, rs in ratios.items():
        every += rs
        print(f"  {mode:>10} {_geomean(rs):.3f}x  ({min(rs):.2f}x, {max(rs):.2f}x)")
    g = _geomean(every)
    print(f"  {'all':>10} {g:.3f}x: {'within' if abs(g - 1) <= TOLERANCE else 'NOT within'} "
          f"{TOLERANCE:.0%} of the model before")
    return 0


def _geomean(xs: list[float]) -> float:
    return math.exp(sum(math.log(x) for x in xs) / len(xs))
