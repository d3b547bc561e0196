"""Flow-setup capacity of the vrouter model with its rate limit off: how many new flows
per second the emulation sets up before it, not the model, is the bottleneck.

A same-host VM pair on a two-host vrouter/gre testbed (``flow_setup_rate: 0``). The
sender opens TCP connections at a rate (vnetbench-flowgen, every one a new 5-tuple).
``--setup agent``: each is a packet-in to the host's agent, which installs the forward
and reverse flow and sends the held SYN on; set-ups/s = the agent's own counter over the
step (its status file). ``--setup datapath`` (the kind's default): OVS's connection
tracker is the flow table; set-ups/s = the connections it added over the step.
Loss = connections that failed or missed the 1 s deadline.

    .venv/bin/python bench/bench_vrouter.py [--setup agent|datapath] [--rates 100 200 400 800 1600]
                                            [--seconds 3] [--ports afpacket]
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import capacity_args, deployed, load_testbed, show, sweep, write_json  # noqa: E402

from vnetbench.battery.common import static_arp  # noqa: E402
from vnetbench.battery.session import stop  # noqa: E402
from vnetbench.kinds.vrouter import netns as vrouter  # noqa: E402
from vnetbench.traffic import flowgen  # noqa: E402

TESTBED = ("name: vrouter-capacity\nvswitch: {kind: vrouter, ports: PORTS, vrouter: {flow_setup: SETUP, "
           "flow_setup_rate: 0}}\n"
           "network: {type: gre}\npairs: [{placement: same-host}]\n")


def set_ups(dep, host: str, setup: str) -> int:
    """Flows set up on HOST so far: the agent's counter, or the connections in the
    datapath's tracker."""
    if setup == "agent":
        return vrouter.agent_status(dep.run.dir, host)["flows_set_up"]
    return vrouter.tracked_flows(dep, host)


def main() -> int:
    a = capacity_args(__doc__, [100, 200, 400, 800, 1600],
                      lambda ap: ap.add_argument("--setup", choices=("agent", "datapath"), default="agent"))
    rows, steps = [], []
    with deployed(load_testbed(TESTBED.replace("PORTS", a.ports).replace("SETUP", a.setup))) as dep:
        src, dst = dep.testbed.pair("same").vms
        host = dep.testbed.vm(src).host
        static_arp(dep, src, dst)
        server = dep.popen(dst, flowgen.server_command(flowgen.ServerParams(listen=dep.ip(dst))),
                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)

        def step(rate):
            """(flowgen's result, the agent's set-ups per second) over one step."""
            before = set_ups(dep, host, a.setup)
            argv = flowgen.client_command(flowgen.ClientParams(
                target=dep.ip(dst), rate=rate, duration_s=a.seconds, deadline_ms=1000))
            res = flowgen.parse(dep.exec(src, argv, timeout=a.seconds + 30).stdout)
            return res, (set_ups(dep, host, a.setup) - before) / a.seconds
        try:
            assert "listening" in server.stdout.readline()
            for rate, (res, setups), m in sweep(dep, a.rates, step):
                vs, agent = m["cpu_pct"], m["cpu_controller_pct"]
                steps.append({"offered_per_s": rate, "achieved_per_s": res["achieved_rate"],
                              "setups_per_s": setups, "loss_pct": res["loss_pct"],
                              "dataplane_cpu_pct": vs, "agent_cpu_pct": agent})
                rows.append([rate, f"{res['achieved_rate']:.0f}", f"{setups:.0f}",
                             f"{res['loss_pct']:.1f}", f"{vs:.0f}", f"{agent:.0f}"])
        finally:
            stop(server, timeout=10)
    show(["offered/s", "opened/s", f"{a.setup} set-ups/s", "loss %", "data-plane CPU %", "of it agent %"],
         rows, title=f"vrouter, flow_setup: {a.setup}, rate limit off (one set-up per new TCP connection)")
    ok = [s for s in steps if s["loss_pct"] < 1.0]
    best = max(ok, key=lambda s: s["setups_per_s"]) if ok else None
    print(f"capacity: {best['setups_per_s']:.0f} flow set-ups/s with < 1% loss "
          f"(offered {best['offered_per_s']}/s)" if best else
          "capacity: below the lowest offered rate (every step lost >= 1%)")
    write_json("bench_vrouter", {"setup": a.setup, "seconds": a.seconds, "steps": steps,
                                 "capacity_setups_per_s": best["setups_per_s"] if best else None})
    return 0


if __name__ == "__main__":
    sys.exit(main())
