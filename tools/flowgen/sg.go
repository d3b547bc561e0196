// The security-group probes for guests without Python: the same lines on stdout as the
// programs of vnetbench.functional.sgmeasure, so the runner reads both the same way.
//
//	vnetbench-flowgen sg-serve -ports PORTS
//	vnetbench-flowgen sg-probe -target IP -port N [-timeout S]
//	vnetbench-flowgen sg-knock -target IP -port N -every S -for S [-attempt S]
//	vnetbench-flowgen sg-stream -target IP -port N -every S -for S
//
// Times are CLOCK_MONOTONIC seconds of the machine the tool runs on (a guest's own
// clock): the runner maps them with probe-clock, and writes sg-knock's request time on
// the guest's clock.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

type sgArgs struct {
	target                     string
	port                       int
	ports                      string
	timeout, every, dur, tries float64
}

func sgFlags(name string, args []string) (*sgArgs, error) {
	a := &sgArgs{}
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.StringVar(&a.target, "target", "", "destination IPv4 address")
	fs.IntVar(&a.port, "port", 0, "destination TCP port")
	fs.StringVar(&a.ports, "ports", "", "ports to serve (5201,5301-5320)")
	fs.Float64Var(&a.timeout, "timeout", 0.8, "probe: seconds to connect and get the echo")
	fs.Float64Var(&a.every, "every", 0.005, "seconds between knocks / echoes")
	fs.Float64Var(&a.dur, "for", 10, "seconds to knock / stream")
	fs.Float64Var(&a.tries, "attempt", 0.5, "knock: seconds one attempt waits for its connection")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if name != "sg-serve" && (net.ParseIP(a.target) == nil || a.port < 1 || a.port > 65535) {
		return nil, fmt.Errorf("%s: -target must be an IP address and -port 1..65535", name)
	}
	if a.every <= 0 || a.dur < 0 || a.timeout <= 0 || a.tries <= 0 {
		return nil, fmt.Errorf("%s: -every, -timeout and -attempt must be > 0, -for >= 0", name)
	}
	return a, nil
}

func seconds(f float64) time.Duration { return time.Duration(f * float64(time.Second)) }

func monoS() float64 { return float64(monotonicNs()) / 1e9 }

func (a *sgArgs) addr() string { return net.JoinHostPort(a.target, strconv.Itoa(a.port)) }

// sgServeMain echoes every connection on every port until killed.
func sgServeMain(args []string) error {
	a, err := sgFlags("sg-serve", args)
	if err != nil {
		return err
	}
	ports, err := parsePorts(a.ports)
	if err != nil {
		return err
	}
	for _, p := range ports {
		l, err := net.Listen("tcp4", fmt.Sprintf("0.0.0.0:%d", p))
		if err != nil {
			return err
		}
		go func(l net.Listener) {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				go func() { defer c.Close(); io.Copy(c, c) }()
			}
		}(l)
	}
	fmt.Println("listening")
	select {}
}

// sgProbeMain: a new connection answered (connected and one byte echoed) or not.
func sgProbeMain(args []string) error {
	a, err := sgFlags("sg-probe", args)
	if err != nil {
		return err
	}
	fmt.Println(map[bool]string{true: "open", false: "blocked"}[echoOnce(a.addr(), seconds(a.timeout))])
	return nil
}

func echoOnce(addr string, timeout time.Duration) bool {
	c, err := net.DialTimeout("tcp4", addr, timeout)
	if err != nil {
		return false
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(timeout))
	buf := []byte{0}
	if _, err := c.Write([]byte("x")); err != nil {
		return false
	}
	_, err = io.ReadFull(c, buf)
	return err == nil && buf[0] == 'x'
}

type knockResult struct {
	start float64
	ok    bool
}

// sgKnockMain starts a connection every -every (attempts overlap, each waiting up to
// -attempt) until one started at or after the request time (read from stdin, this
// machine's clock) is answered; prints "open T" (that attempt's start) or "never".
func sgKnockMain(args []string) error {
	a, err := sgFlags("sg-knock", args)
	if err != nil {
		return err
	}
	sinceC := make(chan float64, 1)
	go func() {
		line, err := bufio.NewReader(os.Stdin).ReadString('\n')
		if f, perr := strconv.ParseFloat(strings.TrimSpace(line), 64); perr == nil && (err == nil || err == io.EOF) {
			sinceC <- f
		}
	}()
	results := make(chan knockResult, 1024)
	var wg sync.WaitGroup
	dialer := net.Dialer{Timeout: seconds(a.tries)}
	fmt.Println("knocking")
	var done []knockResult
	since, haveSince := 0.0, false
	found := func() bool {
		for _, r := range done {
			if haveSince && r.ok && r.start >= since {
				return true
			}
		}
		return false
	}
	until := monoS() + a.dur
	tick := time.NewTicker(seconds(a.every))
	defer tick.Stop()
	for !found() && monoS() < until {
		select {
		case <-tick.C:
			wg.Add(1)
			go func(start float64) {
				defer wg.Done()
				c, err := dialer.Dial("tcp4", a.addr())
				if err == nil {
					c.Close()
				}
				results <- knockResult{start, err == nil}
			}(monoS())
		case r := <-results:
			done = append(done, r)
		case since = <-sinceC:
			haveSince = true
		}
	}
	go func() { wg.Wait(); close(results) }()
	for r := range results { // attempts in flight end within -attempt
		done = append(done, r)
	}
	if !haveSince {
		select {
		case since = <-sinceC:
			haveSince = true
		default:
		}
	}
	first := -1.0
	for _, r := range done {
		if haveSince && r.ok && r.start >= since && (first < 0 || r.start < first) {
			first = r.start
		}
	}
	if first < 0 {
		fmt.Println("never")
	} else {
		fmt.Printf("open %.6f\n", first)
	}
	return nil
}

// sgStreamMain: one connection echoing a byte every -every for -for seconds; each echo
// answered within -every prints its send time.
func sgStreamMain(args []string) error {
	a, err := sgFlags("sg-stream", args)
	if err != nil {
		return err
	}
	c, err := net.DialTimeout("tcp4", a.addr(), 2*time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	fmt.Println("connected")
	every, buf := seconds(a.every), []byte{0}
	until := monoS() + a.dur
	for monoS() < until {
		t, t0 := monoS(), time.Now()
		c.SetDeadline(t0.Add(every))
		if _, err := c.Write([]byte("e")); err == nil {
			if _, err := io.ReadFull(c, buf); err == nil {
				fmt.Printf("echo %.6f\n", t)
			}
		}
		time.Sleep(every - time.Since(t0))
	}
	fmt.Println("done")
	return nil
}
