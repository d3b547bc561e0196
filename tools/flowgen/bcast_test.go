package main

import (
	"encoding/hex"
	"net"
	"testing"
)

// The frames vnetbench.traffic.broadcast builds for the same arguments (recorded from
// arp_frame / icmp_frame): guests and namespaces must send identical traffic.
const (
	pyARP  = "ffffffffffff02766e0000000806000108000604000102766e000000c6130101000000000000c61301020000004d0000000000000000000000000000"
	pyICMP = "ffffffffffff02766e00000008004500002c000500004001eba5c6130101c61301ff0800aadc004d0005766e657462656e63682d626361737421"
)

func TestFramesMatchThePythonTool(t *testing.T) {
	mac, _ := net.ParseMAC("02:76:6e:00:00:00")
	src, tgt, bc := [4]byte{198, 19, 1, 1}, [4]byte{198, 19, 1, 2}, [4]byte{198, 19, 1, 255}
	if got := hex.EncodeToString(arpFrame(mac, src, tgt, 77)); got != pyARP {
		t.Errorf("arp frame\n got %s\nwant %s", got, pyARP)
	}
	if got := hex.EncodeToString(icmpFrame(mac, src, bc, 77, 5)); got != pyICMP {
		t.Errorf("icmp frame\n got %s\nwant %s", got, pyICMP)
	}
}

func TestIsOursNeedsMarkerAddressesAndKind(t *testing.T) {
	mac, _ := net.ParseMAC("02:76:6e:00:00:00")
	a := &bcastArgs{kind: "arp", src: [4]byte{198, 19, 1, 1}, target: [4]byte{198, 19, 1, 2}, marker: 77}
	f := arpFrame(mac, a.src, a.target, 77)
	if !isOurs(f, a) {
		t.Fatal("own ARP frame not counted")
	}
	other := *a
	other.marker = 78
	if isOurs(f, &other) {
		t.Error("ARP frame with another marker counted")
	}
	other = *a
	other.kind = "icmp"
	if isOurs(f, &other) {
		t.Error("ARP frame counted as ICMP")
	}
	i := &bcastArgs{kind: "icmp", src: a.src, target: [4]byte{198, 19, 1, 255}, marker: 77}
	if !isOurs(icmpFrame(mac, i.src, i.target, 77, 9), i) {
		t.Error("own ICMP frame not counted")
	}
	if csum(icmpFrame(mac, i.src, i.target, 77, 9)[14:34]) != 0 {
		t.Error("IP header checksum invalid")
	}
}

func TestBcastFlagsRejectBadInput(t *testing.T) {
	for _, args := range [][]string{
		{"-kind", "udp", "-src-ip", "198.19.1.1", "-target-ip", "198.19.1.2"},
		{"-src-ip", "fe80::1", "-target-ip", "198.19.1.2"},
		{"-src-ip", "198.19.1.1", "-target-ip", "198.19.1.2", "-rate", "0"},
	} {
		if _, err := bcastFlags("t", args, true); err == nil {
			t.Errorf("bcastFlags(%v) accepted", args)
		}
	}
}

// Answers as they arrive at the sender 198.19.1.1 (built by hand, the same bytes as in
// tests/unit/test_broadcast.py): an ARP reply from the asked 198.19.1.2 and an echo reply
// with identifier 77.
const (
	arpReply  = "02766e00000002766e0000010806000108000604000202766e000001c613010202766e000000c6130101000000000000000000000000000000000000"
	icmpReply = "02766e00000002766e00000108004500002c0009000040010000c6130102c613010100000000004d0005766e657462656e63682d626361737421"
)

func TestIsReplyCountsAnswersToOurRequestsOnly(t *testing.T) {
	a := &bcastArgs{kind: "arp", src: [4]byte{198, 19, 1, 1}, target: [4]byte{198, 19, 1, 2}, marker: 77, replies: true}
	f, _ := hex.DecodeString(arpReply)
	if !isReply(f, a) {
		t.Fatal("ARP reply from the asked address not counted")
	}
	other := *a
	other.target = [4]byte{198, 19, 1, 3}
	if isReply(f, &other) {
		t.Error("ARP reply for another address counted")
	}
	mac, _ := net.ParseMAC("02:76:6e:00:00:00")
	if isReply(arpFrame(mac, a.src, a.target, 77), a) {
		t.Error("our own request counted as a reply")
	}
	i := &bcastArgs{kind: "icmp", src: a.src, target: [4]byte{198, 19, 1, 255}, marker: 77, replies: true}
	e, _ := hex.DecodeString(icmpReply)
	if !isReply(e, i) {
		t.Error("echo reply with our identifier not counted")
	}
	i.marker = 78
	if isReply(e, i) {
		t.Error("echo reply with another identifier counted")
	}
}
