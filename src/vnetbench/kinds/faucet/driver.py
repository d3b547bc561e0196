"""``faucet`` on the netns backend: Faucet's process and faucet.yaml (``netns``,
``config``) on the OVS driver's plugging, each VM port at the number faucet.yaml names."""

from __future__ import annotations

from vnetbench.errors import UnsupportedError
from vnetbench.kinds.faucet import netns
from vnetbench.kinds.ovs.driver import Driver as OvsDriver
from vnetbench.testbed.netns.context import context


class Driver(OvsDriver):
    start = staticmethod(netns.start)       # its controller, while the rest is built
    wire = staticmethod(netns.wire)

    def svi(self, ctx, ri, router):
        """Nothing to add on the host: faucet.yaml already gives the router's VLANs their
        ``faucet_vips`` and its ``routers`` entry (``config.faucet_yaml``), and Faucet
        answers ARP for the addresses and routes between the VLANs in its own flows."""

    def expire(self, dep, layers):
        if "controller" in layers:
            raise UnsupportedError("faucet: its learned hosts age after 300 s of silence in "
                                   "Faucet itself; vnetbench cannot make it forget them sooner")
        super().expire(dep, layers)

    def remove_vnet(self, dep, ctx, vnet):
        """The VLAN leaves faucet.yaml and Faucet is told to reload (SIGHUP; it deletes the
        VLAN's flows 0.6-1.4 s later here), and the VM ports leave the bridges as on ovs:
        unplugged at once, as every kind's deprovisioning leaves its VMs."""
        netns.remove_vnet(dep, vnet)
        super().remove_vnet(dep, ctx, vnet)

    def _reprogrammed(self, dep, host, since, before):
        """Faucet programs the restarted bridge when it reconnects (the new ovs-vswitchd
        starts without flows); then the Controller's 1 s backoff is put in force again
        (``netns.apply_controller_settings``: a new ovs-vswitchd starts at OVS's 8 s)."""
        ctx = context(dep)
        o = netns.FaucetHost(ctx, host)
        netns.wait_ready(ctx, [o])
        netns.apply_controller_settings([o])

    def _port_columns(self, dep, nic):
        return []                     # Faucet's VLAN table tags, not the port

    def _port_extra(self, dep, port, vm, k):
        """At the number faucet.yaml names the VM's port by (the same on every host)."""
        return ["--", "set", "Interface", port, f"ofport_request={netns.port_number(dep.testbed, vm, k)}"]

    def plug(self, dep, host, port, vm, k, nic):
        """Plugged as on ovs, at its number; then faucet.yaml moves the port to this
        host's datapath and Faucet reloads."""
        super().plug(dep, host, port, vm, k, nic)
        netns.plugged(dep, host, port, vm, k)

    def control(self):
        return {"components": netns.components, "stop": netns.stop, "start": netns.start_again}
