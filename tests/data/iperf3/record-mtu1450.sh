#!/bin/bash
# Second pass: MSS edge cases on a 1450-MTU veth (a VXLAN guest's MTU), offloads off.
set -u
S=$(openssl rand -hex 3)
A=vnb-rec-$S-a; B=vnb-rec-$S-b
OUT=${OUT:-/tmp/vnbrec/out2}; mkdir -p "$OUT"
echo "$A $B" > /tmp/vnbrec/ns2.txt
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
ip link add va-$S netns "$A" mtu 1450 type veth peer name vb-$S netns "$B" mtu 1450
ip -n "$A" addr add 198.18.99.1/24 dev va-$S; ip -n "$B" addr add 198.18.99.2/24 dev vb-$S
for n in "$A" "$B"; do ip -n "$n" link set lo up; done
ip -n "$A" link set va-$S up; ip -n "$B" link set vb-$S up
ip netns exec "$A" ethtool -K va-$S tso off gso off gro off >/dev/null 2>&1
ip netns exec "$B" ethtool -K vb-$S tso off gso off gro off >/dev/null 2>&1
ip -n "$A" link show va-$S > "$OUT/link-a.txt"
ip netns exec "$A" ping -c1 -W1 198.18.99.2 >/dev/null || { echo "no ping"; exit 1; }

server() { ip netns exec "$B" iperf3 -s -B 198.18.99.2 -p 5201 -1 -J > "$OUT/server-$1.json" 2>&1 & PIDS+=($!); sleep 0.5; }
client() { local name=$1; shift; timeout 15 ip netns exec "$A" iperf3 -c 198.18.99.2 -p 5201 -J "$@" > "$OUT/$name.json" 2>"$OUT/$name.stderr"; echo "$name rc=$?"; }
cap() { ip netns exec "$A" tcpdump -i va-$S -nn -l -v -s 128 -c "$2" "tcp port 5201" > "$OUT/$1.txt" 2>"$OUT/$1.stderr" & PIDS+=($!); sleep 1; }
capsyn() { ip netns exec "$A" tcpdump -i va-$S -nn -l -v -c 4 "tcp port 5201 and tcp[tcpflags] & tcp-syn != 0" > "$OUT/$1.txt" 2>"$OUT/$1.stderr" & PIDS+=($!); sleep 1; }

capsyn mss1468-mtu1450-syn; server mss1468; client tcp-mss1468-mtu1450 -t 1 -M 1468; sleep 0.5
cap mss1468-mtu1450-data 60; server mss1468b; client tcp-mss1468b -t 1 -M 1468; sleep 0.5
cap mss88-data 60; server mss88; client tcp-mss88 -t 1 -M 88; sleep 0.5
cap nomss-mtu1450-data 60; server nomss; client tcp-nomss -t 1; sleep 0.5
server mss68; client error-mss68 -t 1 -M 68; sleep 1
server mss87; client error-mss87 -t 1 -M 87; sleep 1
