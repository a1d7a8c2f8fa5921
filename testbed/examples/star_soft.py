"""Three hosts around p4gen's software switch: ping them, then all-reduce with SwitchML.

    sudo python -m p4gen.testbed.examples.star_soft [--cli]
"""

import sys

from mininet.cli import CLI

from p4gen.testbed import Network, SoftSwitch, StarTopo, build_plan, run_switchml


def main() -> int:
    plan = build_plan(workers=3)                             # a bmv2-target build of SwitchML, cached
    with Network(StarTopo(3, bw=100), switch=SoftSwitch, plan_dir=plan) as net:
        net.program(net.job_spec())                          # every host is a worker of job 0
        dropped = net.mn.pingAll()
        r = run_switchml(net, size=65536)
        print(f"SwitchML, 3 workers, 65536 float32: {r.time:.3f} s, exact sums: {r.exact}")
        if "--cli" in sys.argv:
            CLI(net.mn)
    return 0 if dropped == 0 and r.exact else 1


if __name__ == "__main__":
    sys.exit(main())
