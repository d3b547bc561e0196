"""How fast a new Neutron port carries traffic as the cloud's ports grow (issue 48, "On the
cloud"): the port_ready family on a running all-in-one cloud (tools/aio, any release and
mechanism driver), ovn-heater's way -- each new port is Neutron's port create with
binding:host_id, plugged on its compute node as os-vif would, no guest behind it
(vnetbench.testbed.openstack.ports) -- against a pair of Nova guests, one per compute
node (the probes' peers). Per step: min/p50/p95/p99/max of create -> ACTIVE -> first
packet, the ports never ready; the family's wall time beside. The vnet is a /21, so
2,000 ports fit.

    aio up --release epoxy --ml2 ovn --computes 2 --state DIR
    .venv/bin/python bench/bench_port_ready_cloud.py --clouds DIR/clouds.yaml
        [--ports 250] [--steps 4] [--concurrency 4] [--deadline-ms 60000]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import fmt, show, write_json  # noqa: E402

from vnetbench.battery import portready  # noqa: E402
from vnetbench.errors import VnetbenchError  # noqa: E402

TESTBED = """name: port-ready-cloud
vswitch: {kind}
network: {{type: {net}}}
vnets: [{{name: vnet1, cidr: 198.18.96.0/21}}]
vms:
  - {{name: a, host: h1, vnets: [vnet1]}}
  - {{name: b, host: h2, vnets: [vnet1]}}
"""


def cloud_kind(clouds: Path) -> tuple[str, str, dict]:
    """The testbed kind and tenant network type of the AIO's driver, and its facts."""
    meta = json.loads((clouds.parent / "meta.json").read_text())
    ovn = meta.get("ml2") == "ovn"
    return ("ovn", "geneve", meta) if ovn else ("ovs", "vxlan", meta)


def row(r) -> list:
    m = {k: v[0] for k, v in r.samples.items()}
    return [r.extra["existing_ports"], m["ports"], m["not_ready"],
            *(fmt(m.get(f"{s}_{q}_ms"), ".0f") for s in ("requested", "programmed", "first_packet")
              for q in ("p50", "p95", "max"))]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--clouds", type=Path, required=True, help="the AIO's clouds.yaml")
    ap.add_argument("--ports", type=int, default=250)
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--concurrency", type=int, default=4)
    ap.add_argument("--deadline-ms", type=float, default=60000)
    a = ap.parse_args(argv)
    try:
        portready.check(a.ports, a.steps, a.concurrency, a.deadline_ms, 1.0, capacity=2000)
    except VnetbenchError as exc:
        print(exc, file=sys.stderr)
        return 2
    if not a.clouds.is_file() or not (a.clouds.parent / "meta.json").is_file():
        print(f"--clouds {a.clouds}: not an all-in-one cloud's clouds.yaml (no meta.json beside it)",
              file=sys.stderr)
        return 2
    kind, net, meta = cloud_kind(a.clouds)
    from vnetbench.testbed import deployment
    tmp = Path(tempfile.mkdtemp(prefix="vnb-bench-pr-"))
    (tmp / "tb.yaml").write_text(TESTBED.format(kind=kind, net=net))
    env = {**os.environ, "OS_CLIENT_CONFIG_FILE": str(a.clouds), "VNETBENCH_STATE_DIR": str(tmp / "state")}
    vnetbench = str(Path(sys.executable).parent / "vnetbench")
    up = subprocess.run([vnetbench, "testbed", "up", str(tmp / "tb.yaml"), "--backend", "openstack",
                         "--cloud", "vnetbench-aio", "--mgmt-network", "vnetbench-flat", "--json"],
                        env=env, capture_output=True, text=True, timeout=1800)
    if up.returncode != 0:
        print(up.stderr[-2000:], file=sys.stderr)
        return 1
    run_id = json.loads(up.stdout)["run_id"]
    os.environ.update({k: env[k] for k in ("OS_CLIENT_CONFIG_FILE", "VNETBENCH_STATE_DIR")})
    try:
        dep = deployment.attach(run_id)
        t0 = time.monotonic()
        results = portready.run(dep, a.ports, a.steps, a.concurrency, a.deadline_ms)
        wall = time.monotonic() - t0
    finally:
        subprocess.run([vnetbench, "testbed", "down", "--run", run_id], env=env, timeout=1800)
    label = f"{meta.get('release')}/{meta.get('ml2')}, {meta.get('computes')} nodes"
    show(["existing", "new", "never ready",
          *(f"{s} {q}" for s in ("create", "ACTIVE", "first pkt") for q in ("p50", "p95", "max"))],
         [row(r) for r in results], title=f"{label}: ms from the port create; probe every 1 ms")
    print(f"{a.steps} steps of {a.ports} ports in {wall:.0f} s (teardown of the ports included)")
    write_json("port_ready_cloud", {"args": {**vars(a), "clouds": str(a.clouds)}, "cloud": label,
                                    "wall_s": wall,
                                    "steps": [{"existing": r.extra["existing_ports"],
                                               "metrics": {k: v[0] for k, v in r.samples.items()},
                                               "never_ready": r.extra["never_ready"]} for r in results]})
    return 0


if __name__ == "__main__":
    sys.exit(main())
