"""Restart the vSwitch of one emulated host, the way an operator would restart that kind
(``Deployment.restart_vswitch``): OVS kinds restart ``ovs-vswitchd`` on the same database and
wait for whatever programs their flows to put them back; a Linux bridge goes down and
up, which flushes what it learned. Returns once the host forwards again."""

from __future__ import annotations


def restart(dep, host: str) -> None:
    dep.restart_vswitch(host)
