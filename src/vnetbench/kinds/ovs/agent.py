"""One host's Open vSwitch agent for the ``ovs`` kind: ``python -m vnetbench.kinds.ovs.agent``.

What the ``ovs`` kind keeps outside OVSDB is OpenFlow state: each egress limit's meter
and its ``in_port`` flow. They die with ovs-vswitchd. Neutron's OVS agent notices that
in its ``rpc_loop``: every ``polling_interval`` (2 s by default) ``check_ovs_status``
dumps the canary flow it keeps in table 23 (``CANARY_TABLE``); when it is gone OVS
restarted, and the agent sets the bridge up again and re-provisions every port, its QoS
included. This does the same for the flows the kind installs: the OpenFlow commands
of the host's provisioning (``--config``, written by the builder, which runs them
itself at bring-up) are replayed whenever the canary is missing, and each
re-provisioning is a JSON line on stdout (the agent's log).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

PROCESS_NAME = b"neutron-openvswitch-agent"
CANARY_TABLE = 23                       # neutron's constants.CANARY_TABLE
POLLING_INTERVAL_S = 2.0                # neutron's [agent] polling_interval default


def canary_flow() -> str:
    """Neutron's canary: a drop flow in a table no packet reaches."""
    return f"table={CANARY_TABLE},priority=0,actions=drop"


def canary_present(dump: str) -> bool:
    """``ovs-ofctl dump-flows <bridge> table=23`` output holds the canary."""
    return any(f"table={CANARY_TABLE}," in line and "actions=drop" in line
               for line in dump.splitlines())


def _ofctl(args, timeout=5.0) -> subprocess.CompletedProcess:
    return subprocess.run(["ovs-ofctl", "-O", "OpenFlow13", *args], capture_output=True,
                          text=True, timeout=timeout, stdin=subprocess.DEVNULL)


def poll(bridge: str, commands: list[list[str]]) -> str:
    """One round of the loop: 'ok', 'dead' (ovs-vswitchd not answering: retry next
    round, as neutron's OVS_DEAD) or 'restarted' (the commands were replayed)."""
    try:
        dump = _ofctl(["dump-flows", bridge, f"table={CANARY_TABLE}"])
    except subprocess.TimeoutExpired:
        return "dead"
    if dump.returncode != 0:
        return "dead"
    if canary_present(dump.stdout):
        return "ok"
    for args in commands:        # the canary is the last: a replay cut short is redone
        try:
            if _ofctl(args).returncode != 0:
                return "dead"
        except subprocess.TimeoutExpired:
            return "dead"
    return "restarted"


def _name_process() -> None:
    try:
        with open("/proc/self/comm", "wb") as f:
            f.write(PROCESS_NAME[:15])
    except OSError:
        pass


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="vnetbench.kinds.ovs.agent")
    p.add_argument("--pidfile", required=True)
    p.add_argument("--config", required=True,
                   help="JSON: bridge (ovs-ofctl target), commands (ovs-ofctl argument lists)")
    p.add_argument("--interval", type=float, default=POLLING_INTERVAL_S)
    args = p.parse_args(argv)
    with open(args.config) as f:
        config = json.load(f)
    _name_process()
    tmp = f"{args.pidfile}.tmp"
    with open(tmp, "w") as f:
        f.write(f"{os.getpid()}\n")
    os.replace(tmp, args.pidfile)
    while True:
        time.sleep(args.interval)
        state = poll(config["bridge"], config["commands"])
        if state == "restarted":
            print(json.dumps({"time": time.time(), "event": "reprovisioned",
                              "commands": len(config["commands"])}), flush=True)


if __name__ == "__main__":
    sys.exit(main())
