"""Neutron's own agents as the emulated hosts run them, shared by the kinds that inherit
them (Neutron ML2's ``agent/`` beside its mechanism drivers): the legacy L3 agent's router
namespaces (``l3agent``, NAT by Neutron's code in ``l3_nat``), the security-group RPC
payload (``sg``), the security-group agent process and its control (``sg_agent``,
``sg_control``), and Neutron's OVN ACLs (``ovn_acls``). The scripts run with the system's
python3 and python3-neutron; the rest are drivers' helpers, never a kind's description."""
