"""Which combinations are refused, and how, for a given set of probed facts."""

import pytest

from vnetbench.errors import PrerequisiteError, UnsupportedError
from vnetbench.testbed.capabilities import LINK_KINDS, PACKAGES, Capabilities
from vnetbench.testbed.loader import loads
from vnetbench.testbed.model import NetType, VSwitchKind


def caps(root=True, missing=(), no_links=(), ovs_kernel=False):
    return Capabilities(root=root,
                        binaries={p: (None if p in missing else f"/usr/bin/{p}") for p in PACKAGES},
                        links={k: ("Operation not supported" if k in no_links else None) for k in LINK_KINDS},
                        ovs_kernel=ovs_kernel, ovs_version="3.1.0")


def test_this_machine_class():
    c = caps(no_links=("vlan", "gretap", "geneve", "bridge-vlan-filtering"))
    supported = {(k, t) for k, t, r in c.matrix() if r is None}
    assert supported == {(VSwitchKind.LINUXBRIDGE, NetType.FLAT), (VSwitchKind.LINUXBRIDGE, NetType.VXLAN)} | {
        (VSwitchKind.OVS, t) for t in NetType} | {
        (VSwitchKind.OVS_OPENFLOW, t) for t in NetType} | {
        (VSwitchKind.OVN, t) for t in NetType if t is not NetType.GRE} | {
        (VSwitchKind.VROUTER, NetType.GRE)} | {
        (VSwitchKind.FAUCET, NetType.VLAN), (VSwitchKind.FAUCET, NetType.FLAT)}
    assert "gretap" in c.why_not(VSwitchKind.LINUXBRIDGE, NetType.GRE)
    assert "CONFIG_NET_IPGRE" in c.why_not(VSwitchKind.LINUXBRIDGE, NetType.GRE)
    assert c.ovs_datapath == "netdev"


def test_missing_program_names_the_package():
    reason = caps(missing=("ovs-vswitchd",)).why_not(VSwitchKind.OVS, NetType.VXLAN)
    assert reason.startswith("ovs-vswitchd not found") and "openvswitch-switch" in reason


def test_vrouter_says_gre_means_mplsogre_and_needs_userspace():
    assert caps().why_not(VSwitchKind.VROUTER, NetType.GRE) is None
    for t in (NetType.FLAT, NetType.VLAN, NetType.VXLAN, NetType.GENEVE):
        assert "MPLSoGRE" in caps().why_not(VSwitchKind.VROUTER, t)
    assert "userspace" in caps().why_not(VSwitchKind.VROUTER, NetType.GRE, datapath="system")


def test_ovn_says_what_it_carries_and_needs_its_packages():
    assert "no GRE encapsulation" in caps().why_not(VSwitchKind.OVN, NetType.GRE)
    assert caps().why_not(VSwitchKind.OVN, NetType.FLAT) is None        # localnet ports
    reason = caps(missing=("ovn-controller",)).why_not(VSwitchKind.OVN, NetType.GENEVE)
    assert reason.startswith("ovn-controller not found") and "ovn-host" in reason
    assert "kernel module" in caps().why_not(VSwitchKind.OVN, NetType.GENEVE, datapath="system")


def test_system_datapath_needs_the_module():
    assert "kernel module" in caps().why_not(VSwitchKind.OVS, NetType.VXLAN, datapath="system")
    assert caps(ovs_kernel=True).why_not(VSwitchKind.OVS, NetType.VXLAN, datapath="system") is None


def test_require_refuses_in_one_line():
    tb = loads("vswitch: linuxbridge\nnetwork: {type: gre}\n", source="lb-gre.yaml")
    with pytest.raises(UnsupportedError) as err:
        caps(no_links=("gretap",)).require(tb)
    assert str(err.value).startswith("lb-gre.yaml: linuxbridge + gre cannot run here: kernel lacks gretap")
    assert "\n" not in str(err.value)
    with pytest.raises(PrerequisiteError, match="needs root"):
        caps(root=False).require(tb)


def test_linuxbridge_gre_names_the_kernel_feature_first_then_the_gap():
    assert "gretap" in caps(no_links=("gretap",)).why_not(VSwitchKind.LINUXBRIDGE, NetType.GRE)
    assert "not wired" in caps().why_not(VSwitchKind.LINUXBRIDGE, NetType.GENEVE)


def test_egress_limit_refused_where_no_mechanism_exists():
    text = ("vswitch: {kind}\nnetwork: {{type: gre}}\nvnets: [{{name: red, cidr: 198.19.1.0/24}}]\n"
            "vms:\n  - {{name: a, host: h1, vnets: [{{name: red, qos: {{max_kbps: 10000, direction: {d}}}}}]}}\n")
    def tbed(kind, d="egress"):
        return loads(text.format(kind=kind, d=d), source="t.yaml", online_cpus=[0, 1])
    c = caps()
    assert c.why_not_egress(tbed("ovs")) is None and c.why_not_egress(tbed("ovn")) is None
    assert c.why_not_egress(tbed("ovs-openflow", "ingress")) is None
    assert "meter" in c.why_not_egress(tbed("ovs-openflow"))
    assert c.why_not_egress(tbed("vrouter")) is None          # the agent meters it
    assert c.why_not_egress(tbed("linuxbridge")) is None
    assert "CONFIG_IFB" in caps(no_links=("ifb",)).why_not_egress(tbed("linuxbridge"))
    with pytest.raises(UnsupportedError, match="t.yaml: ovs-openflow"):
        c.require(tbed("ovs-openflow"))


@pytest.mark.parametrize("kind", [k.value for k in VSwitchKind])
def test_security_groups_refused_by_a_kind_that_does_not_enforce_them(kind):
    """Never built unfiltered: a kind that does not enforce security groups refuses the
    testbed; one with no filtered port (port_security false everywhere) builds."""
    from vnetbench import kinds
    c, net = caps(), kinds.get(kind).preferred_network.value
    on = loads(f"vswitch: {kind}\nnetwork: {{type: {net}}}\nsecurity_groups: []\n", source="t.yaml")
    off = loads(f"vswitch: {kind}\nnetwork: {{type: {net}}}\nsecurity_groups: []\n"
                "vms: [{name: x, host: h1, vnets: [{name: vnet1, "
                "port_security: false}]}]\n", source="t.yaml")
    assert c.why_not_security_groups(off) is None
    reason = c.why_not_security_groups(on)
    if reason:
        assert "security groups" in reason
        with pytest.raises(UnsupportedError, match="security groups"):
            c.require(on)
