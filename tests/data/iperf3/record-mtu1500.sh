#!/bin/bash
# Record real iperf3 / tcpdump outputs between two throwaway namespaces.
set -u
S=$(openssl rand -hex 3)
A=vnb-rec-$S-a; B=vnb-rec-$S-b
OUT=${OUT:-/tmp/vnbrec/out}; mkdir -p "$OUT"
echo "$A $B" > /tmp/vnbrec/ns.txt
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done
  sleep 0.3
  ip netns pids "$A" 2>/dev/null | xargs -r kill 2>/dev/null
  ip netns pids "$B" 2>/dev/null | xargs -r kill 2>/dev/null
  ip netns del "$A" 2>/dev/null; ip netns del "$B" 2>/dev/null
  echo "cleaned $A $B"
}
trap cleanup EXIT
ip netns add "$A"; ip netns add "$B"
ip link add va-$S netns "$A" type veth peer name vb-$S netns "$B"
ip -n "$A" addr add 198.18.99.1/24 dev va-$S; ip -n "$B" addr add 198.18.99.2/24 dev vb-$S
for n in "$A" "$B"; do ip -n "$n" link set lo up; done
ip -n "$A" link set va-$S up; ip -n "$B" link set vb-$S up
ip -n "$A" link show va-$S > "$OUT/link-a.txt"
ip netns exec "$A" ethtool -k va-$S | grep -E 'segmentation|receive-offload' > "$OUT/offload-a.txt"
ip netns exec "$A" ping -c1 -W1 198.18.99.2 >/dev/null || { echo "no ping"; exit 1; }

server() { ip netns exec "$B" iperf3 -s -B 198.18.99.2 -p 5201 -1 -J > "$OUT/server-$1.json" 2>&1 & PIDS+=($!); sleep 0.5; }
client() { local name=$1; shift; ip netns exec "$A" iperf3 -c 198.18.99.2 -p 5201 -J "$@" > "$OUT/$name.json" 2>"$OUT/$name.stderr"; echo "$name rc=$?"; wait "${PIDS[-1]}" 2>/dev/null; }

server tcp-1;        client tcp-1 -t 2
server tcp-p2;       client tcp-p2 -t 2 -P 2
server udp-500m;     client udp-500m -t 2 -u -b 500M
server udp-p5-b0;    client udp-p5-b0 -t 2 -u -P 5 -b 0
server tcp-omit;     client tcp-omit -t 2 -O 1
# error: nobody listens on 5299
client error-refused -t 2 -p 5299

# -M 1000 with tcpdump on A's veth, offloads as created (TSO/GSO on)
cap() { ip netns exec "$A" tcpdump -i va-$S -nn -l -v -s 128 -c "$2" "tcp port 5201" > "$OUT/$1.txt" 2>"$OUT/$1.stderr" & PIDS+=($!); sleep 1; }
cap mss1000-offload-on 60; server tcp-mss1000; client tcp-mss1000 -t 2 -M 1000; sleep 0.5; kill "${PIDS[-2]}" 2>/dev/null
# SYN-only capture
capsyn() { ip netns exec "$A" tcpdump -i va-$S -nn -l -v -c 4 "tcp port 5201 and tcp[tcpflags] & tcp-syn != 0" > "$OUT/$1.txt" 2>"$OUT/$1.stderr" & PIDS+=($!); sleep 1; }
capsyn mss1000-syn; server tcp-mss1000-b; client tcp-mss1000-b -t 1 -M 1000; sleep 0.5
# offloads off on both ends: what the wire would carry
ip netns exec "$A" ethtool -K va-$S tso off gso off gro off >/dev/null 2>&1
ip netns exec "$B" ethtool -K vb-$S tso off gso off gro off >/dev/null 2>&1
cap mss1000-offload-off 60; server tcp-mss1000-c; client tcp-mss1000-c -t 1 -M 1000; sleep 0.5
ip netns exec "$A" ethtool -k va-$S | grep -E 'segmentation|receive-offload' > "$OUT/offload-a-off.txt"
sleep 0.5
