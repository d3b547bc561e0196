"""Restart the vSwitch of one emulated host, the way an operator would restart that kind
(``Kind.netns_restart``): OVS kinds restart ``ovs-vswitchd`` on the same database and
wait for whatever programs their flows to put them back; a Linux bridge goes down and
up, which flushes what it learned. Returns once the host forwards again."""

from __future__ import annotations

from vnetbench import kinds


def restart(dep, host: str) -> None:
    kinds.of(dep).netns_restart(dep, dep.testbed.host(host))
