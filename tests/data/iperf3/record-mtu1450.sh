#!/bin/bash
# Second pass: MSS edge cases on a 1450-MTU veth (a VXLAN guest's MTU), offloads off.
OUT=${OUT:-/tmp/vnbrec/out2}
MTU=1450
. "$(dirname "$0")/record-lib.sh"
offloads_off
ip -n "$A" link show va-$S > "$OUT/link-a.txt"
ip netns exec "$A" ping -c1 -W1 198.18.99.2 >/dev/null || { echo "no ping"; exit 1; }

capsyn mss1468-mtu1450-syn; server mss1468; client tcp-mss1468-mtu1450 -t 1 -M 1468; sleep 0.5
cap mss1468-mtu1450-data 60; server mss1468b; client tcp-mss1468b -t 1 -M 1468; sleep 0.5
cap mss88-data 60; server mss88; client tcp-mss88 -t 1 -M 88; sleep 0.5
cap nomss-mtu1450-data 60; server nomss; client tcp-nomss -t 1; sleep 0.5
server mss68; client error-mss68 -t 1 -M 68; sleep 1
server mss87; client error-mss87 -t 1 -M 87; sleep 1
