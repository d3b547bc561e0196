#!/bin/bash
# Record real iperf3 / tcpdump outputs between two throwaway namespaces.
OUT=${OUT:-/tmp/vnbrec/out}
. "$(dirname "$0")/record-lib.sh"
ip -n "$A" link show va-$S > "$OUT/link-a.txt"
ip netns exec "$A" ethtool -k va-$S | grep -E 'segmentation|receive-offload' > "$OUT/offload-a.txt"
ip netns exec "$A" ping -c1 -W1 198.18.99.2 >/dev/null || { echo "no ping"; exit 1; }

server tcp-1;        client tcp-1 -t 2
server tcp-p2;       client tcp-p2 -t 2 -P 2
server udp-500m;     client udp-500m -t 2 -u -b 500M
server udp-p5-b0;    client udp-p5-b0 -t 2 -u -P 5 -b 0
# the sender as client with the receiver's own view (functional rate rows: the sender's
# timer ends the flood; the receiver's intervals come back in server_output_json)
server udp-srv-out;  client udp-b20m-server-output -t 2 -u -b 20M -l 1472 --get-server-output
server tcp-omit;     client tcp-omit -t 2 -O 1
# error: nobody listens on 5299
client error-refused -t 2 -p 5299

# -M 1000 with tcpdump on A's veth, offloads as created (TSO/GSO on)
cap mss1000-offload-on 60; server tcp-mss1000; client tcp-mss1000 -t 2 -M 1000; sleep 0.5; kill "${PIDS[-2]}" 2>/dev/null
# SYN-only capture
capsyn mss1000-syn; server tcp-mss1000-b; client tcp-mss1000-b -t 1 -M 1000; sleep 0.5
# offloads off on both ends: what the wire would carry
offloads_off
cap mss1000-offload-off 60; server tcp-mss1000-c; client tcp-mss1000-c -t 1 -M 1000; sleep 0.5
ip netns exec "$A" ethtool -k va-$S | grep -E 'segmentation|receive-offload' > "$OUT/offload-a-off.txt"
sleep 0.5
