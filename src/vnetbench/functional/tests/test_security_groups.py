"""Security groups (issue 27): what Neutron's rules allow, measured with real traffic
on each kind that enforces them; a kind that does not is refused at build time (N/A
with the reason), never measured unfiltered.

web-1 (h1) is in groups web and knock, web-2 (h2) in web, def-1 (h1) and def-2 (h2) in
Neutron's default group. web admits TCP 5201 from anywhere and ICMP from its members;
knock starts empty and gets a rule per knock port at run time.
"""


import pytest

from vnetbench.functional import sgmeasure as sg
from vnetbench.functional import verdict
from vnetbench.functional.plugin import deployment_fixture

TESTBED = """
vswitch: {kind}
network: {{type: {ntype}}}
vnets: [{{name: red, cidr: 198.19.1.0/24}}]
security_groups:
  - name: web
    rules:
      - {{direction: ingress, protocol: tcp, port_range_min: 5201}}
      - {{direction: ingress, protocol: icmp, remote_group: web}}
  - name: knock
vms:
  - {{name: web-1, host: h1, vnets: [{{name: red, security_groups: [web, knock]}}]}}
  - {{name: web-2, host: h2, vnets: [{{name: red, security_groups: [web]}}]}}
  - {{name: def-1, host: h1}}
  - {{name: def-2, host: h2}}
"""
OPEN, CLOSED = 5201, 5202
KNOCK_PORTS = tuple(range(5301, 5321))       # 20 rules
KNOCK_S, KNOCK_TIMEOUT_S = 0.005, 10.0
# the removal's stream: echoes for STREAM_AFTER_S after the request; still answered in its
# last STREAM_TAIL_S, the connection kept flowing (an agent that applies the change seconds
# later -- the OVS agent's 2 s polling loop on a cloud -- has stopped it by then)
STREAM_EVERY_S, STREAM_AFTER_S, STREAM_TAIL_S = 0.01, 4.0, 1.0

dep = deployment_fixture(TESTBED, "security-groups")
# --quick measures these rows on one kind: every enforcing kind's probes are judged against
# the rules by tests/integration/test_security_groups.py


@pytest.fixture(scope="module")
def servers(dep):
    procs = [sg.serve(dep, vm.name, (OPEN, CLOSED, *KNOCK_PORTS)) for vm in dep.testbed.vms]
    yield
    for p in procs:
        p.kill()
        p.wait()


def _probe(dep, what, src, dst, port=None):
    ip = dep.ip(dst)
    got = sg.icmp_open(dep, src, ip) if port is None else sg.tcp_open(dep, src, ip, port)
    return {"what": f"{src}->{dst} {'icmp' if port is None else f'tcp/{port}'} ({what})", "open": got}


@pytest.mark.row("sg.default-deny")
@pytest.mark.quick_one_kind
def test_default_group_admits_members_only(dep, servers, record):
    m = {"allowed": [_probe(dep, "member", "def-2", "def-1", OPEN), _probe(dep, "member", "def-2", "def-1")],
         "denied": [_probe(dep, "not a member", "web-1", "def-1", OPEN),
                    _probe(dep, "not a member", "web-2", "def-1")]}
    record(verdict.sg_admits(m), m)


@pytest.mark.row("sg.allowed-port")
@pytest.mark.quick_one_kind
def test_allowed_port_passes_another_does_not(dep, servers, record):
    m = {"allowed": [_probe(dep, "allowed port", "def-1", "web-1", OPEN)],
         "denied": [_probe(dep, "no rule", "def-1", "web-1", CLOSED)]}
    record(verdict.sg_admits(m), m)


@pytest.mark.row("sg.stateful")
@pytest.mark.quick_one_kind
def test_replies_pass_where_new_connections_do_not(dep, servers, record):
    """def-2 -> web-1 is allowed (web's TCP rule); its replies enter def-2, whose default
    group admits nothing new from web-1 (the control: web-1 -> def-2 is blocked)."""
    m = {"allowed": [_probe(dep, "replies by state", "def-2", "web-1", OPEN)],
         "denied": [_probe(dep, "new, the other way", "web-1", "def-2", OPEN)]}
    record(verdict.sg_admits(m), m)


@pytest.mark.row("sg.remote-group")
@pytest.mark.quick_one_kind
def test_remote_group_admits_a_member_not_a_non_member(dep, servers, record):
    m = {"allowed": [_probe(dep, "member of web", "web-2", "web-1")],
         "denied": [_probe(dep, "not a member", "def-2", "web-1")]}
    record(verdict.sg_admits(m), m)


@pytest.mark.row("sg.rule-latency")
@pytest.mark.quick_one_kind
def test_rule_to_first_packet(dep, servers, record):
    """Per rule: a knock every 5 ms from def-2 (across hosts) to a port of web-1 no rule
    admits; the rule is added to web-1's group knock; the time from the request to the
    first answered knock (resolution: the knock interval)."""
    clock = sg.offset_s(dep, "def-2")
    latencies = sg.rule_to_first_packet(dep, "def-2", "web-1", "knock", KNOCK_PORTS, KNOCK_S, KNOCK_TIMEOUT_S,
                                        clock=clock)
    m = {"latencies_ms": latencies, "knock_ms": KNOCK_S * 1000, "timeout_s": KNOCK_TIMEOUT_S,
         "clock_uncertainty_ms": clock[1] * 1000}
    record(verdict.sg_rule_latency(m), m)


@pytest.mark.row("sg.rule-removal")
@pytest.mark.quick_one_kind
def test_rule_removed_under_an_established_connection(dep, servers, record):
    """def-1 -> web-1:5201 echoes a byte every 10 ms; web's TCP rule is removed; does the
    connection go on? (Neutron's iptables driver deletes the conntrack entries the rule
    admitted; a driver that keeps them lets the connection flow.) The removal's request
    returns when the API answered; an agent may apply it later, so the verdict is on the
    stream's last STREAM_TAIL_S of STREAM_AFTER_S."""
    m = sg.rule_removal(dep, "def-1", "web-1", "web", OPEN, STREAM_EVERY_S, STREAM_AFTER_S, STREAM_TAIL_S)
    record(verdict.sg_rule_removal(m), m)
