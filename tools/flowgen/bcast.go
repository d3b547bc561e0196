// Broadcast sender and counter (seed 003 row 4) for VMs without Python: the same frames,
// pacing and JSON lines as vnetbench.traffic.broadcast, so results compare across backends.
//
//	vnetbench-flowgen bcast-send  -iface IF -kind arp|icmp -src-ip IP -target-ip IP -rate N -seconds S -marker M
//	vnetbench-flowgen bcast-count -iface IF -kind arp|icmp -src-ip IP -target-ip IP -seconds S -marker M [-replies]
//
// ARP: a request for -target-ip with M in the padding. ICMP: an echo request to the
// broadcast address -target-ip with identifier M. The counter counts only frames that
// carry the sender's address and the marker; with -replies (run at the sender) it counts
// the answers instead: ARP replies from -target-ip, echo replies with identifier M.
package main

import (
	"bytes"
	"encoding/binary"
	"flag"
	"fmt"
	"net"
	"net/netip"
	"syscall"
	"time"
)

const (
	ethPAll, ethPArp, ethPIP = 0x0003, 0x0806, 0x0800
	packetOutgoing           = 4 // PACKET_OUTGOING: a frame this host sent, looped back to the socket
)

var broadcastMAC = bytes.Repeat([]byte{0xff}, 6)

type bcastArgs struct {
	iface, kind   string
	src, target   [4]byte
	rate, seconds float64
	marker        uint32
	replies       bool
}

func bcastFlags(name string, args []string, withRate bool) (*bcastArgs, error) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	iface := fs.String("iface", "eth0", "interface")
	kind := fs.String("kind", "arp", "arp or icmp")
	src := fs.String("src-ip", "", "sender's IPv4 address")
	target := fs.String("target-ip", "", "arp: the address asked for; icmp: the broadcast address")
	seconds := fs.Float64("seconds", 5, "duration, s")
	marker := fs.Uint("marker", 0, "ICMP id / ARP padding tag")
	rate := new(float64)
	replies := new(bool)
	if withRate {
		rate = fs.Float64("rate", 1000, "frames per second")
	} else {
		replies = fs.Bool("replies", false, "count the answers to our requests, at the sender")
	}
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	a := &bcastArgs{iface: *iface, kind: *kind, rate: *rate, seconds: *seconds, marker: uint32(*marker),
		replies: *replies}
	if a.kind != "arp" && a.kind != "icmp" {
		return nil, fmt.Errorf("-kind %q: want arp or icmp", a.kind)
	}
	for _, f := range []struct {
		s   string
		dst *[4]byte
		n   string
	}{{*src, &a.src, "-src-ip"}, {*target, &a.target, "-target-ip"}} {
		ip, err := netip.ParseAddr(f.s)
		if err != nil || !ip.Is4() {
			return nil, fmt.Errorf("%s %q: want an IPv4 address", f.n, f.s)
		}
		*f.dst = ip.As4()
	}
	if withRate && (a.rate <= 0 || a.seconds <= 0) {
		return nil, fmt.Errorf("-rate and -seconds must be positive")
	}
	return a, nil
}

func csum(b []byte) uint16 {
	if len(b)%2 == 1 {
		b = append(append([]byte{}, b...), 0)
	}
	var s uint32
	for i := 0; i < len(b); i += 2 {
		s += uint32(binary.BigEndian.Uint16(b[i:]))
	}
	s = (s >> 16) + (s & 0xffff)
	s += s >> 16
	return ^uint16(s)
}

func arpFrame(mac net.HardwareAddr, src, target [4]byte, marker uint32) []byte {
	f := append(append(append([]byte{}, broadcastMAC...), mac...), 0x08, 0x06)
	f = append(f, 0, 1, 0x08, 0x00, 6, 4, 0, 1)
	f = append(append(append(f, mac...), src[:]...), make([]byte, 6)...)
	f = append(f, target[:]...)
	pad := make([]byte, 18) // to the 60-byte minimum, the marker first
	binary.BigEndian.PutUint32(pad, marker)
	return append(f, pad...)
}

func icmpFrame(mac net.HardwareAddr, src, bcast [4]byte, marker uint32, seq int) []byte {
	icmp := []byte{8, 0, 0, 0, 0, 0, 0, 0}
	binary.BigEndian.PutUint16(icmp[4:], uint16(marker))
	binary.BigEndian.PutUint16(icmp[6:], uint16(seq))
	icmp = append(icmp, "vnetbench-bcast!"...)
	binary.BigEndian.PutUint16(icmp[2:], csum(icmp))
	ip := []byte{0x45, 0, 0, 0, 0, 0, 0, 0, 64, 1, 0, 0}
	binary.BigEndian.PutUint16(ip[2:], uint16(20+len(icmp)))
	binary.BigEndian.PutUint16(ip[4:], uint16(seq))
	ip = append(append(ip, src[:]...), bcast[:]...)
	binary.BigEndian.PutUint16(ip[10:], csum(ip))
	f := append(append(append([]byte{}, broadcastMAC...), mac...), 0x08, 0x00)
	return append(append(f, ip...), icmp...)
}

func isOurs(f []byte, a *bcastArgs) bool {
	if len(f) < 42 || !bytes.Equal(f[:6], broadcastMAC) {
		return false
	}
	etype := binary.BigEndian.Uint16(f[12:14])
	if a.kind == "arp" {
		return etype == ethPArp && len(f) >= 46 && f[20] == 0 && f[21] == 1 &&
			bytes.Equal(f[28:32], a.src[:]) && bytes.Equal(f[38:42], a.target[:]) &&
			binary.BigEndian.Uint32(f[42:46]) == a.marker
	}
	return etype == ethPIP && f[23] == 1 && bytes.Equal(f[30:34], a.target[:]) &&
		bytes.Equal(f[26:30], a.src[:]) && f[34] == 8 &&
		binary.BigEndian.Uint16(f[38:40]) == uint16(a.marker)
}

// isReply: an answer to one of our requests arriving at the sender (a.src): an ARP reply
// from a.target (the peer or a proxy), or an echo reply with our identifier.
func isReply(f []byte, a *bcastArgs) bool {
	if len(f) < 42 {
		return false
	}
	etype := binary.BigEndian.Uint16(f[12:14])
	if a.kind == "arp" {
		return etype == ethPArp && f[20] == 0 && f[21] == 2 &&
			bytes.Equal(f[28:32], a.target[:]) && bytes.Equal(f[38:42], a.src[:])
	}
	return etype == ethPIP && f[23] == 1 && bytes.Equal(f[30:34], a.src[:]) && f[34] == 0 &&
		binary.BigEndian.Uint16(f[38:40]) == uint16(a.marker)
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

func packetSocket(iface string, proto uint16) (int, *net.Interface, error) {
	ifc, err := net.InterfaceByName(iface)
	if err != nil {
		return -1, nil, err
	}
	fd, err := syscall.Socket(syscall.AF_PACKET, syscall.SOCK_RAW, int(htons(proto)))
	if err != nil {
		return -1, nil, fmt.Errorf("AF_PACKET socket: %w", err)
	}
	if err := syscall.Bind(fd, &syscall.SockaddrLinklayer{Protocol: htons(proto), Ifindex: ifc.Index}); err != nil {
		syscall.Close(fd)
		return -1, nil, fmt.Errorf("bind to %s: %w", iface, err)
	}
	return fd, ifc, nil
}

func bcastSendMain(args []string) error {
	a, err := bcastFlags("bcast-send", args, true)
	if err != nil {
		return err
	}
	fd, ifc, err := packetSocket(a.iface, 0)
	if err != nil {
		return err
	}
	defer syscall.Close(fd)
	total := int(a.rate * a.seconds)
	start := time.Now()
	sent, errs := 0, 0
	for i := 0; i < total; i++ {
		due := start.Add(time.Duration(float64(i) / a.rate * float64(time.Second)))
		if d := time.Until(due); d > 0 {
			time.Sleep(d)
		}
		var frame []byte
		if a.kind == "arp" {
			frame = arpFrame(ifc.HardwareAddr, a.src, a.target, a.marker)
		} else {
			frame = icmpFrame(ifc.HardwareAddr, a.src, a.target, a.marker, i)
		}
		if _, err := syscall.Write(fd, frame); err != nil {
			errs++
		} else {
			sent++
		}
	}
	elapsed := time.Since(start).Seconds()
	pps := 0.0
	if elapsed > 0 {
		pps = float64(sent) / elapsed
	}
	printJSON(map[string]interface{}{"sent": sent, "errors": errs, "seconds": elapsed, "achieved_pps": pps})
	return nil
}

func bcastCountMain(args []string) error {
	a, err := bcastFlags("bcast-count", args, false)
	if err != nil {
		return err
	}
	fd, _, err := packetSocket(a.iface, ethPAll)
	if err != nil {
		return err
	}
	defer syscall.Close(fd)
	tv := syscall.NsecToTimeval(int64(100 * time.Millisecond))
	if err := syscall.SetsockoptTimeval(fd, syscall.SOL_SOCKET, syscall.SO_RCVTIMEO, &tv); err != nil {
		return err
	}
	printJSON(map[string]interface{}{"ready": true})
	end := time.Now().Add(time.Duration(a.seconds * float64(time.Second)))
	buf := make([]byte, 2048)
	received := 0
	match := isOurs
	if a.replies {
		match = isReply
	}
	for time.Now().Before(end) {
		n, from, err := syscall.Recvfrom(fd, buf, 0)
		if err != nil {
			continue // timeout (EAGAIN) or EINTR
		}
		if ll, ok := from.(*syscall.SockaddrLinklayer); ok && ll.Pkttype == packetOutgoing {
			continue
		}
		if match(buf[:n], a) {
			received++
		}
	}
	printJSON(map[string]interface{}{"received": received})
	return nil
}
