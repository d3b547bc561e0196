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
