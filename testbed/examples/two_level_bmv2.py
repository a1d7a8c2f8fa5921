"""Two racks of two hosts under Linux-bridge leaves; the spine is BMv2 running the p4c-compiled program.

    sudo python -m p4gen.testbed.examples.two_level_bmv2 [--cli]

Needs p4c-bm2-ss and simple_switch_grpc on PATH.
"""

import sys

from mininet.cli import CLI

from p4gen.testbed import BMv2Switch, Network, TwoLevelTopo, build_plan, run_switchml


def main() -> int:
    why = BMv2Switch.missing()
    if why:
        print(f"two_level_bmv2: {why}", file=sys.stderr)
        return 1
    plan = build_plan(workers=4, compile_p4=True)               # SwitchML; adds program.json (p4c-bm2-ss)
    with Network(TwoLevelTopo(2, 2, bw=100), switch=BMv2Switch, plan_dir=plan) as net:
        net.program(net.job_spec())                             # over P4Runtime, by p4gen.controller
        dropped = net.mn.pingAll()
        r = run_switchml(net, size=16384)
        print(f"SwitchML on BMv2, 4 workers in 2 racks, 16384 float32: {r.time:.3f} s, exact sums: {r.exact}")
        if "--cli" in sys.argv:
            CLI(net.mn)
    return 0 if dropped == 0 and r.exact else 1


if __name__ == "__main__":
    sys.exit(main())
