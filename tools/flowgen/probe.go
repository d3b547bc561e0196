// The sequence-numbered UDP probe tool for guests without Python: the same datagrams,
// flags and JSON lines as vnetbench.traffic.probe send|recv, plus the guest's clock.
//
//	vnetbench-flowgen probe-send -dest IP -port N -interval-ms MS -seconds S -marker M [-broadcast]
//	vnetbench-flowgen probe-recv -port N -seconds S -marker M
//	vnetbench-flowgen probe-clock
//
// Times are CLOCK_MONOTONIC nanoseconds of the machine the tool runs on: a guest's own
// clock, which the runner maps onto its clock with probe-clock (measure.clock_offset).
package main

import (
	"encoding/binary"
	"flag"
	"fmt"
	"net"
	"syscall"
	"time"
	"unsafe"
)

var probeMagic = []byte("VNBP")

const probeHeader = 20 // magic(4) marker(4) seq(4) send time ns(8), network order

type probeArgs struct {
	dest              string
	port              int
	interval, seconds float64
	marker            uint64
	broadcast         bool
	firstWithin       float64
}

func monotonicNs() int64 {
	var ts syscall.Timespec
	syscall.Syscall(syscall.SYS_CLOCK_GETTIME, 1 /* CLOCK_MONOTONIC */, uintptr(unsafe.Pointer(&ts)), 0)
	return ts.Nano()
}

func probeFlags(name string, args []string) (*probeArgs, error) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	a := &probeArgs{}
	fs.StringVar(&a.dest, "dest", "", "destination IPv4 address (send)")
	fs.IntVar(&a.port, "port", 0, "UDP port")
	fs.Float64Var(&a.interval, "interval-ms", 5, "milliseconds between probes (send)")
	fs.Float64Var(&a.seconds, "seconds", 0, "how long to send or listen")
	fs.Uint64Var(&a.marker, "marker", 0, "marker of this run's probes")
	fs.BoolVar(&a.broadcast, "broadcast", false, "SO_BROADCAST (dest may be a broadcast address)")
	fs.Float64Var(&a.firstWithin, "first-within", 0, "recv: -seconds count from the first probe, "+
		"which may take this long")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if a.port <= 0 || a.port > 65535 || a.seconds <= 0 || a.marker > 0xffffffff {
		return nil, fmt.Errorf("%s: need -port 1..65535, -seconds > 0 and -marker < 2^32", name)
	}
	if name == "probe-send" && (net.ParseIP(a.dest).To4() == nil || a.interval <= 0) {
		return nil, fmt.Errorf("probe-send: need -dest IPv4 and -interval-ms > 0")
	}
	return a, nil
}

// probeSocket parses a mode's flags and opens its UDP socket.
func probeSocket(name string, args []string) (*probeArgs, int, error) {
	a, err := probeFlags(name, args)
	if err != nil {
		return nil, -1, err
	}
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_DGRAM, 0)
	return a, fd, err
}

func probeFrame(marker uint32, seq uint32, now int64) []byte {
	b := make([]byte, probeHeader)
	copy(b, probeMagic)
	binary.BigEndian.PutUint32(b[4:], marker)
	binary.BigEndian.PutUint32(b[8:], seq)
	binary.BigEndian.PutUint64(b[12:], uint64(now))
	return b
}

func probeSendMain(args []string) error {
	a, fd, err := probeSocket("probe-send", args)
	if err != nil {
		return err
	}
	defer syscall.Close(fd)
	if a.broadcast {
		if err := syscall.SetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_BROADCAST, 1); err != nil {
			return err
		}
	}
	to := &syscall.SockaddrInet4{Port: a.port}
	copy(to.Addr[:], net.ParseIP(a.dest).To4())
	interval := int64(a.interval * 1e6)
	total := int(a.seconds * 1e3 / a.interval)
	if total < 1 {
		total = 1
	}
	start := monotonicNs()
	sent, errs := 0, 0
	var first, last, end interface{}
	for seq := 0; seq < total; seq++ {
		if d := start + int64(seq)*interval - monotonicNs(); d > 0 {
			time.Sleep(time.Duration(d))
		}
		now := monotonicNs()
		end = now // the last attempt, sent or not: how long the sender kept trying
		err := syscall.Sendto(fd, probeFrame(uint32(a.marker), uint32(seq), now), 0, to)
		if seq == 0 { // the first probe is out: a caller may time its change by it
			printJSON(map[string]interface{}{"ready": true})
		}
		if err != nil {
			errs++ // e.g. ENETUNREACH, or ENOBUFS on a full queue
			continue
		}
		sent++
		if first == nil {
			first = now
		}
		last = now
	}
	printJSON(map[string]interface{}{"sent": sent, "errors": errs, "first_ns": first,
		"last_ns": last, "end_ns": end, "interval_ns": interval})
	return nil
}

func probeRecvMain(args []string) error {
	a, fd, err := probeSocket("probe-recv", args)
	if err != nil {
		return err
	}
	defer syscall.Close(fd)
	_ = syscall.SetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_REUSEADDR, 1)
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Port: a.port}); err != nil {
		return err
	}
	tv := syscall.NsecToTimeval(int64(100 * time.Millisecond))
	_ = syscall.SetsockoptTimeval(fd, syscall.SOL_SOCKET, syscall.SO_RCVTIMEO, &tv)
	printJSON(map[string]interface{}{"ready": true})
	end := monotonicNs() + int64((a.seconds+a.firstWithin)*1e9)
	probes := [][3]int64{}
	buf := make([]byte, 2048)
	for monotonicNs() < end {
		n, _, err := syscall.Recvfrom(fd, buf, 0)
		if err != nil {
			continue // the receive timeout: look at the clock again
		}
		now := monotonicNs()
		if n >= probeHeader && string(buf[:4]) == string(probeMagic) &&
			uint64(binary.BigEndian.Uint32(buf[4:])) == a.marker {
			if len(probes) == 0 && a.firstWithin > 0 {
				end = now + int64(a.seconds*1e9)
			}
			probes = append(probes, [3]int64{int64(binary.BigEndian.Uint32(buf[8:])),
				int64(binary.BigEndian.Uint64(buf[12:])), now})
		}
	}
	printJSON(map[string]interface{}{"received": len(probes), "probes": probes})
	return nil
}

func probeClockMain(args []string) error {
	if len(args) > 0 {
		return fmt.Errorf("probe-clock takes no arguments")
	}
	printJSON(map[string]interface{}{"monotonic_ns": monotonicNs()})
	return nil
}
