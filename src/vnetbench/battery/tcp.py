"""Unidirectional TCP with an MSS sweep (seed 003 row 2).

The seed's 68 / 1468 / 8908 are mapped onto what the path allows (traffic.mss):
Linux's minimum MSS, the tenant MTU, a jumbo underlay for 8908. The MSS the
kernel really used is read from the SYN/SYN-ACK on the wire and reported
beside the nominal and requested ones.
"""

from __future__ import annotations

from vnetbench.battery.common import repeat, result
from vnetbench.errors import UnsupportedError
from vnetbench.battery.session import capture, iperf3_server
from vnetbench.results.record import now
from vnetbench.traffic import iperf3, mss


def run(dep, pair, nominal_mss=mss.SEED_MSS, seconds=10, repetitions=3, verify_on_wire=True):
    src, dst = pair.vms
    plans = mss.plan_sweep(dep.testbed.network.tenant_mtu, nominal_mss)
    out = []
    for plan in plans:
        started = now()
        wire = []

        def measure():
            res, check = _one(dep, src, dst, plan["used"], seconds, verify_on_wire)
            wire.append(check)
            return ({"gbps": res["bits_per_second"] / 1e9, "retransmits": res["retransmits"],
                     "mss_on_wire": check.get("mss_on_wire")},
                    {"gbps_intervals": res["samples_gbps"], "intervals_side": res["samples_side"]})
        samples, extras = repeat(dep, repetitions, measure)
        params = {**plan, "seconds": seconds}
        r = result(dep, pair, "tcp_stream", params, samples, extras, started)
        r.labels["point"] = f"mss {plan['nominal']}"     # the MSS used is in params (and the table)
        r.extra["wire"] = wire
        out.append(r)
    return out


def _one(dep, src, dst, used, seconds, verify):
    client = iperf3.client_command(iperf3.ClientParams(dest=dep.reach(src, dst), seconds=seconds, mss=used))
    if not verify:
        with iperf3_server(dep, dst):
            return iperf3.parse(dep.exec(src, client, timeout=seconds + 30).stdout), {}
    host, port, where = _capture_point(dep, src)
    argv_of = lambda iface: mss.capture_command(iface, iperf3.DEFAULT_PORT, count=4, syn_only=True)  # noqa: E731
    with iperf3_server(dep, dst), (capture(dep, None, argv_of, host=host, link=port) if host else
                                   capture(dep, src, argv_of(port))) as captured:
        res = iperf3.parse(dep.exec(src, client, timeout=seconds + 30).stdout)
        check = mss.wire_check(used, captured())
    return res, {**{k: check[k] for k in ("syn_mss", "mss_on_wire", "mss_ok")}, "captured_at": where}


def _capture_point(dep, src) -> tuple[str | None, str, str]:
    """(host, interface, where): the host side of the sender's port, the wire as the
    vSwitch sees it, whatever the VM is (a namespace, a guest whose capture would run over
    its command channel); where the hosts are not ours (a cloud's compute nodes), the
    sender's own NIC inside the VM, the last point the tenant can see; an external host's
    own NIC (it sends from outside the cloud)."""
    if dep.testbed.external_host(src) is not None:
        return None, "eth0", "external host eth0"
    try:
        host, port = dep.vm_port(src)
        return host, port, "host port"
    except UnsupportedError:
        return None, "eth0", "guest eth0"
