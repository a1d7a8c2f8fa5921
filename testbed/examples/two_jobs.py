"""Two jobs share one switch: h1+h2 on slots 0-31, h3+h4 on slots 32-63, all-reducing at the same time.

    sudo python -m p4gen.testbed.examples.two_jobs
"""

import sys
from concurrent.futures import ThreadPoolExecutor

from p4gen.testbed import Network, SoftSwitch, StarTopo, build_plan, run_switchml


def main() -> int:
    plan = build_plan(workers=4)                             # SwitchML
    with Network(StarTopo(4, bw=50), switch=SoftSwitch, plan_dir=plan) as net:
        a = net.job_spec(["h1", "h2"], job=0, mgid=1, slot_base=0, slot_count=32)
        b = net.job_spec(["h3", "h4"], job=1, mgid=2, slot_base=32, slot_count=32)
        net.program(a, b)
        with ThreadPoolExecutor(2) as pool:
            runs = [pool.submit(run_switchml, net, spec=s, size=65536, seed=s.job) for s in (a, b)]
            results = [f.result() for f in runs]
    for spec, r in zip((a, b), results):
        print(f"job {spec.job} ({r.workers} workers): {r.time:.3f} s, exact sums: {r.exact}")
    return 0 if all(r.exact for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
