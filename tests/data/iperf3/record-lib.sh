# Shared by record-mtu*.sh: two throwaway namespaces joined by a veth of MTU ${MTU:-1500}
# (198.18.99.1 -> .2), removed on exit, and helpers that record iperf3 / tcpdump output
# into $OUT. Source it after setting OUT (and MTU).
set -u
S=$(openssl rand -hex 3)
A=vnb-rec-$S-a; B=vnb-rec-$S-b
mkdir -p "$OUT"
echo "$A $B" > "$OUT/ns.txt"
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
ip link add va-$S netns "$A" mtu "${MTU:-1500}" type veth peer name vb-$S netns "$B" mtu "${MTU:-1500}"
ip -n "$A" addr add 198.18.99.1/24 dev va-$S; ip -n "$B" addr add 198.18.99.2/24 dev vb-$S
for n in "$A" "$B"; do ip -n "$n" link set lo up; done
ip -n "$A" link set va-$S up; ip -n "$B" link set vb-$S up

offloads_off() {
  ip netns exec "$A" ethtool -K va-$S tso off gso off gro off >/dev/null 2>&1
  ip netns exec "$B" ethtool -K vb-$S tso off gso off gro off >/dev/null 2>&1
}
server() { ip netns exec "$B" iperf3 -s -B 198.18.99.2 -p 5201 -1 -J > "$OUT/server-$1.json" 2>&1 & PIDS+=($!); sleep 0.5; }
client() { local name=$1; shift; timeout 15 ip netns exec "$A" iperf3 -c 198.18.99.2 -p 5201 -J "$@" > "$OUT/$name.json" 2>"$OUT/$name.stderr"; echo "$name rc=$?"; settle; }
# give the last background process (the one-off server) up to 2 s to finish writing
settle() { for _ in $(seq 20); do kill -0 "${PIDS[-1]}" 2>/dev/null || return 0; sleep 0.1; done; }
cap() { ip netns exec "$A" tcpdump -i va-$S -nn -l -v -s 128 -c "$2" "tcp port 5201" > "$OUT/$1.txt" 2>"$OUT/$1.stderr" & PIDS+=($!); sleep 1; }
capsyn() { ip netns exec "$A" tcpdump -i va-$S -nn -l -v -c 4 "tcp port 5201 and tcp[tcpflags] & tcp-syn != 0" > "$OUT/$1.txt" 2>"$OUT/$1.stderr" & PIDS+=($!); sleep 1; }
