"""A router's NAT as Neutron's legacy L3 agent writes it: Neutron's own ``RouterInfo``
rule methods and ``IptablesManager`` (Debian's python3-neutron), fed one router by
vnetbench instead of a Neutron server. Run with the system's python3 inside the router's
network namespace (the venv's Python has no neutron); it imports nothing of vnetbench
and runs isolated (``-I``).

    ip netns exec NS python3 -I l3_nat.py < ROUTER.json

ROUTER.json: {"device": "qg", "gateway": "198.18.128.2" | null, "snat": true,
              "floating_ips": [["198.19.2.1", "198.18.128.3"], ...]}   (fixed, floating)

What it runs is what the agent runs for a router with a gateway (``_handle_router_snat_rules``:
SNAT for the router's vnets when ``snat``, the mark that keeps DNAT'd traffic from the
outside un-SNAT'd) and its floating IPs (``process_floating_ip_nat_rules``: DNAT in,
SNAT out), then ``IptablesManager.apply`` (iptables-save, Neutron's diff,
iptables-restore). Not modelled: address scopes (the agent's ``scope`` and
``floatingip`` mangle chains mark traffic between scopes; a testbed has one). The
commands applied are printed, one per line.
"""

import json
import subprocess
import sys


def _execute(cmd, process_input=None, check_exit_code=True, **_):
    """Neutron's ``linux_utils.execute`` without privsep or a root helper: we are root,
    already in the router's namespace."""
    done = subprocess.run(cmd, input=process_input, capture_output=True, text=True, timeout=30)
    if check_exit_code and done.returncode:
        raise RuntimeError(f"{' '.join(cmd)}: exit {done.returncode}: {done.stderr.strip()}")
    return done.stdout


class _Router:
    """What ``RouterInfo``'s NAT methods read of their router: the manager, the agent's
    configuration, whether SNAT is on. Its methods are Neutron's, unbound."""

    def __init__(self, manager, snat: bool, floating_ips):
        from neutron.agent.l3 import router_info
        from neutron.conf.agent.l3 import config as l3_config
        from oslo_config import cfg
        conf = cfg.ConfigOpts()
        l3_config.register_l3_agent_config_opts(l3_config.OPTS, conf)
        conf([])
        self.agent_conf, self.iptables_manager, self._snat_enabled = conf, manager, snat
        self.fips = [{"fixed_ip_address": f, "floating_ip_address": p} for f, p in floating_ips]
        ri = router_info.RouterInfo
        for name in ("_handle_router_snat_rules", "_empty_snat_chains", "_add_snat_rules",
                     "external_gateway_nat_snat_rules", "external_gateway_nat_fip_rules",
                     "_prevent_snat_for_internal_traffic_rule", "external_gateway_mangle_rules",
                     "floating_forward_rules", "process_floating_ip_nat_rules"):
            setattr(self, name, getattr(ri, name).__get__(self))

    def get_floating_ips(self):
        return self.fips

    def process_external_port_address_scope_routing(self, iptables_manager):
        """Address scopes are not modelled (one scope: nothing to mark)."""


def main() -> int:
    spec = json.load(sys.stdin)
    from neutron.agent.linux import iptables_manager
    iptables_manager.linux_utils.execute = _execute
    manager = iptables_manager.IptablesManager(use_ipv6=False, nat=True, external_lock=False,
                                               binary_name="neutron-l3-agent")
    router = _Router(manager, spec["snat"], spec.get("floating_ips", []))
    with manager.defer_apply():             # applied once, when the deferral ends
        if spec.get("gateway"):
            router._handle_router_snat_rules({"fixed_ips": [{"ip_address": spec["gateway"]}]},
                                             spec["device"])
        router.process_floating_ip_nat_rules()
    for line in manager.get_rules_for_table("nat") + manager.get_rules_for_table("mangle"):
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
