"""One host's vRouter agent: ``python -m vnetbench.kinds.vrouter.agent``.

An os-ken app that is the OpenFlow controller of its host's OVS bridge (listening
on the host namespace's loopback) and a client of the control node over the
management network. ``vnetbench.kinds.vrouter.logic.Agent`` decides; this module sends the
decisions as OpenFlow 1.3 messages, runs the flow-setup queue at the configured
rate, answers DHCP, and keeps the control-node session: on ``bye`` or after the
hold time without a message the control node is lost -- without ``headless`` the
learned routes are flushed, with it they are kept until a new session refreshes them.
The process names itself ``contrail-vrouter-agent`` (the collector's component name).
"""

from __future__ import annotations

import argparse
import json
import sys

PROCESS_NAME = b"contrail-vrouter-agent"
#: the switch connection's receive buffer (bytes; accepted sockets inherit it, the kernel
#: doubles it): with the host's TCP send buffers (``netns.PACKET_IN_WMEM``) the bound on
#: the packet-ins queued for the agent, as the real vRouter's pkt0 ring bounds its own
PACKET_IN_BUFFER = 32 * 1024


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="vnetbench.kinds.vrouter.agent")
    p.add_argument("--pidfile", required=True)
    p.add_argument("--config", required=True, help="JSON written by the testbed builder")
    p.add_argument("--listen", required=True, help="ADDRESS:PORT for the bridge's OpenFlow")
    p.add_argument("--control", required=True, help="ADDRESS:PORT of the control node")
    p.add_argument("--state", required=True, help="file the agent keeps its status in")
    p.add_argument("--record", help="append raw packet-ins (JSON lines)")
    args = p.parse_args(argv)
    from vnetbench.sdn.controller import listening, run_osken
    host, port = args.listen.rsplit(":", 1)
    server = listening((host, int(port)), rcvbuf=PACKET_IN_BUFFER)
    with open(args.config) as f:
        config = json.load(f)
    run_osken(PROCESS_NAME, args.pidfile, args.listen, "vnetbench.kinds.vrouter.app",
              dict(config=config, control=args.control, state=args.state, record=args.record),
              server=server)
    return 0


if __name__ == "__main__":
    sys.exit(main())
