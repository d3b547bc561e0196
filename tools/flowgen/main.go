// Command vnetbench-flowgen measures TCP flow-setup rate: new connections per second,
// each a new 5-tuple, opened open-loop at a fixed rate.
//
//	vnetbench-flowgen server -listen IP:PORTS
//	vnetbench-flowgen client -target IP -ports PORTS -rate N -duration S -deadline MS
//	                         [-sources IP,IP...] [-timeout MS] [-write BYTES] [-max-lag MS] [-json]
//
// and the broadcast tool for guests without Python (bcast.go):
//
//	vnetbench-flowgen bcast-send|bcast-count -iface IF -kind arp|icmp ...
//
// and the one-way probe tool for guests (probe.go):
//
//	vnetbench-flowgen probe-send|probe-recv|probe-clock ...
//
// and the security-group probes for guests (sg.go):
//
//	vnetbench-flowgen sg-serve|sg-probe|sg-knock|sg-stream ...
//
// PORTS is a list like 5000-5063 or 5000,5002,6000-6009.
//
// The server accepts on every port and never closes first: it reads until the client
// closes or resets (a server that closes first makes a fast client's connect report
// false resets). It prints one JSON line when it is listening and one with its counters
// when it gets SIGINT or SIGTERM.
//
// The client starts connection i at t0 + i/rate whatever happened to earlier ones,
// rotating over destination ports and source addresses so that 5-tuples are new (the
// kernel picks the source port and may reuse one: unique_tuples counts them). Each
// connection is a non-blocking connect -> optional write -> close with SO_LINGER 0, so
// it ends with a RST and leaves no TIME_WAIT on either side. A connection that
// connected later than -deadline is "late"; one that failed (refused, reset, timeout
// after -timeout, ...) is "failed"; loss_pct counts both.
//
// Both sides are one epoll loop over raw non-blocking sockets, not a goroutine and a
// net.Conn per connection: on this 2-CPU machine class that runtime cost alone (40-50 %
// of the client's CPU at 20,000 connections/s, against about 15 % for this loop) made
// latency and schedule lag collapse before the kernel's limit. A connect never blocks the
// loop, so a slow connection cannot delay the schedule; between starts the loop waits in
// epoll_wait for at most 1 ms, so a start is normally up to ~1 ms late (schedule_lag_us).
// Out of file descriptors, the server stops accepting until connections end; the
// client counts the attempt as failed (no_fd).
//
// IPv4 and IPv6, Linux only, standard library only; builds with Go 1.19.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math"
	"net"
	"net/netip"
	"os"
	"os/signal"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

const (
	slot                = time.Millisecond // longest sleep of the client between due starts
	ipBindAddressNoPort = 24               // IP_BIND_ADDRESS_NO_PORT (Linux), not in package syscall
	listenBacklog       = 65535            // the kernel caps it at net.core.somaxconn
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: vnetbench-flowgen server|client|bcast-send|bcast-count|probe-send|probe-recv|probe-clock|sg-serve|sg-probe|sg-knock|sg-stream [flags] (-h for flags)")
		os.Exit(2)
	}
	raiseFileLimit()
	var err error
	switch os.Args[1] {
	case "server":
		err = serverMain(os.Args[2:])
	case "client":
		err = clientMain(os.Args[2:])
	case "bcast-send":
		err = bcastSendMain(os.Args[2:])
	case "bcast-count":
		err = bcastCountMain(os.Args[2:])
	case "probe-send":
		err = probeSendMain(os.Args[2:])
	case "probe-recv":
		err = probeRecvMain(os.Args[2:])
	case "probe-clock":
		err = probeClockMain(os.Args[2:])
	case "sg-serve":
		err = sgServeMain(os.Args[2:])
	case "sg-probe":
		err = sgProbeMain(os.Args[2:])
	case "sg-knock":
		err = sgKnockMain(os.Args[2:])
	case "sg-stream":
		err = sgStreamMain(os.Args[2:])
	default:
		err = fmt.Errorf("unknown mode %q: want server, client, bcast-send, bcast-count, "+
			"probe-send, probe-recv, probe-clock or sg-serve|sg-probe|sg-knock|sg-stream", os.Args[1])
	}
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "vnetbench-flowgen:", err)
		os.Exit(2)
	}
}

// raiseFileLimit lifts RLIMIT_NOFILE as far as allowed: an open-loop client can have
// rate x timeout connections in flight.
func raiseFileLimit() {
	var lim syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim) != nil {
		return
	}
	want := syscall.Rlimit{Cur: 1 << 20, Max: 1 << 20}
	if lim.Max >= want.Max || syscall.Setrlimit(syscall.RLIMIT_NOFILE, &want) != nil {
		lim.Cur = lim.Max // without CAP_SYS_RESOURCE: the soft limit up to the hard one
		_ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim)
	}
}

// parsePorts reads "5000-5063" or "5000,5002,6000-6009".
func parsePorts(spec string) ([]int, error) {
	var ports []int
	for _, item := range strings.Split(spec, ",") {
		lo, hi, isRange := strings.Cut(item, "-")
		a, err1 := strconv.Atoi(lo)
		b, err2 := a, error(nil)
		if isRange {
			b, err2 = strconv.Atoi(hi)
		}
		if err1 != nil || err2 != nil || a < 1 || b > 65535 || a > b {
			return nil, fmt.Errorf("bad port list %q: want P, P1-P2 or a comma list of those (1-65535)", spec)
		}
		for p := a; p <= b; p++ {
			ports = append(ports, p)
		}
	}
	return ports, nil
}

func parseIP(s, what string) (netip.Addr, error) {
	ip, err := netip.ParseAddr(s)
	if err != nil || ip.Zone() != "" {
		return netip.Addr{}, fmt.Errorf("bad %s %q: want an IP address", what, s)
	}
	return ip.Unmap(), nil
}

// sockaddr and family of ip:port for the raw socket calls.
func sockaddr(ip netip.Addr, port int) (syscall.Sockaddr, int) {
	if ip.Is4() {
		return &syscall.SockaddrInet4{Addr: ip.As4(), Port: port}, syscall.AF_INET
	}
	return &syscall.SockaddrInet6{Addr: ip.As16(), Port: port}, syscall.AF_INET6
}

func addrPort(sa syscall.Sockaddr) netip.AddrPort {
	switch a := sa.(type) {
	case *syscall.SockaddrInet4:
		return netip.AddrPortFrom(netip.AddrFrom4(a.Addr), uint16(a.Port))
	case *syscall.SockaddrInet6:
		return netip.AddrPortFrom(netip.AddrFrom16(a.Addr), uint16(a.Port))
	}
	return netip.AddrPort{}
}

func printJSON(v interface{}) {
	out, _ := json.Marshal(v)
	fmt.Println(string(out))
}

func epollAdd(epfd, fd int, events uint32) error {
	return syscall.EpollCtl(epfd, syscall.EPOLL_CTL_ADD, fd, &syscall.EpollEvent{Events: events, Fd: int32(fd)})
}

// epollWait returns the ready events; EINTR (the Go runtime's signals) means none.
func epollWait(epfd int, events []syscall.EpollEvent, msec int) ([]syscall.EpollEvent, error) {
	n, err := syscall.EpollWait(epfd, events, msec)
	if err == syscall.EINTR {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return events[:n], nil
}

// ---- server ----------------------------------------------------------------

type serverStats struct {
	Mode         string `json:"mode"`
	Accepted     int64  `json:"accepted"`
	ClosedByPeer int64  `json:"closed_by_peer"`
	ResetByPeer  int64  `json:"reset_by_peer"`
	ReadErrors   int64  `json:"read_errors"`
	AcceptErrors int64  `json:"accept_errors"`
	Bytes        int64  `json:"bytes"`
	OpenAtStop   int64  `json:"open_at_stop"` // accepted, not yet ended by the peer
}

func serverMain(args []string) error {
	fs := flag.NewFlagSet("server", flag.ContinueOnError)
	listen := fs.String("listen", "", "IP:PORTS to accept on, e.g. 198.18.98.2:5000-5063")
	if err := fs.Parse(args); err != nil {
		return err
	}
	host, spec, err := net.SplitHostPort(*listen)
	if err != nil {
		return fmt.Errorf("bad -listen %q: want IP:PORTS", *listen)
	}
	ip, err := parseIP(host, "-listen address")
	if err != nil {
		return err
	}
	ports, err := parsePorts(spec)
	if err != nil {
		return err
	}
	epfd, err := syscall.EpollCreate1(syscall.EPOLL_CLOEXEC)
	if err != nil {
		return err
	}
	listeners := map[int32]bool{}
	for _, p := range ports {
		sa, family := sockaddr(ip, p)
		fd, err := syscall.Socket(family, syscall.SOCK_STREAM|syscall.SOCK_NONBLOCK|syscall.SOCK_CLOEXEC, 0)
		if err == nil {
			listeners[int32(fd)] = true
			_ = syscall.SetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_REUSEADDR, 1)
			err = syscall.Bind(fd, sa)
		}
		if err == nil {
			err = syscall.Listen(fd, listenBacklog)
		}
		if err == nil {
			err = epollAdd(epfd, fd, syscall.EPOLLIN)
		}
		if err != nil {
			return fmt.Errorf("listen on %s: %w", netip.AddrPortFrom(ip, uint16(p)), err)
		}
	}
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGINT, syscall.SIGTERM)
	printJSON(map[string]interface{}{"mode": "server", "listening": ip.String(), "ports": len(ports)})

	st := serverStats{Mode: "server"}
	events := make([]syscall.EpollEvent, 256)
	var buf [4096]byte
	// Out of descriptors, the listeners leave the epoll set (the kernel keeps queueing
	// connections) until 256 connections have ended, instead of failing accepts in a loop.
	resumeIn := 0
	setAccepting := func(on bool) {
		for fd := range listeners {
			if on {
				_ = epollAdd(epfd, int(fd), syscall.EPOLLIN)
			} else {
				_ = syscall.EpollCtl(epfd, syscall.EPOLL_CTL_DEL, int(fd), nil)
			}
		}
	}
	for {
		select {
		case <-stop:
			st.OpenAtStop = st.Accepted - st.ClosedByPeer - st.ResetByPeer - st.ReadErrors
			printJSON(st)
			return nil
		default:
		}
		ready, err := epollWait(epfd, events, 100)
		if err != nil {
			return err
		}
		if len(ready) == 0 && resumeIn > 0 { // idle for 100 ms: try again
			resumeIn = 0
			setAccepting(true)
		}
		for _, ev := range ready {
			fd := int(ev.Fd)
			if listeners[ev.Fd] {
				for resumeIn == 0 { // accept all queued; they stay open until the peer ends them
					cfd, _, err := syscall.Accept4(fd, syscall.SOCK_NONBLOCK|syscall.SOCK_CLOEXEC)
					if err == syscall.EAGAIN || err == syscall.EINTR {
						break
					}
					if err != nil {
						st.AcceptErrors++
						if err == syscall.EMFILE || err == syscall.ENFILE {
							resumeIn = 256
							setAccepting(false)
						}
						break
					}
					st.Accepted++
					if epollAdd(epfd, cfd, syscall.EPOLLIN|syscall.EPOLLRDHUP) != nil {
						st.ReadErrors++
						syscall.Close(cfd)
					}
				}
				continue
			}
			k, err := syscall.Read(fd, buf[:])
			switch {
			case k > 0:
				st.Bytes += int64(k)
				continue // level-triggered: the rest, or the end, comes as another event
			case err == syscall.EAGAIN || err == syscall.EINTR:
				continue
			case err == nil:
				st.ClosedByPeer++
			case err == syscall.ECONNRESET:
				st.ResetByPeer++
			default:
				st.ReadErrors++
			}
			syscall.Close(fd) // closing removes it from the epoll set
			if resumeIn > 0 {
				if resumeIn--; resumeIn == 0 {
					setAccepting(true)
				}
			}
		}
	}
}

// ---- client ----------------------------------------------------------------

type attempt struct {
	fd    int
	idx   int // its result in client.out
	start time.Time
	done  bool
}

type result struct {
	lag, lat time.Duration // schedule lag (start - due time); connect latency
	class    string        // error class, "" on success
	msg      string        // the error text
	src      netip.AddrPort
	dport    uint16
}

type client struct {
	target  netip.Addr
	ports   []int
	sources []netip.Addr // empty: the kernel's choice
	payload []byte
	timeout time.Duration
	epfd    int
	pending map[int]*attempt // by fd, waiting for the connect to finish
	queue   []*attempt       // the same, oldest first, for timeouts
	out     []result
}

func clientMain(args []string) error {
	fs := flag.NewFlagSet("client", flag.ContinueOnError)
	target := fs.String("target", "", "server IP")
	portSpec := fs.String("ports", "", "destination ports, e.g. 5000-5063")
	rate := fs.Float64("rate", 0, "new connections per second")
	duration := fs.Float64("duration", 0, "seconds of connection attempts")
	deadlineMS := fs.Float64("deadline", 1000, "ms: a connect that takes longer counts as late (lost)")
	timeoutMS := fs.Float64("timeout", 3000, "ms: give up connecting after this (error class timeout)")
	sources := fs.String("sources", "", "comma list of local IPs to rotate over (default: the kernel's choice)")
	write := fs.Int("write", 0, "bytes to write after connecting (0: none)")
	maxLagMS := fs.Float64("max-lag", 10, "ms: schedule_kept is false if any connection started later than this")
	asJSON := fs.Bool("json", false, "print the result as one JSON object")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ip, err := parseIP(*target, "-target")
	if err != nil {
		return err
	}
	c := &client{target: ip, payload: make([]byte, *write), timeout: msDuration(*timeoutMS),
		pending: map[int]*attempt{}}
	if c.ports, err = parsePorts(*portSpec); err != nil {
		return err
	}
	for _, s := range strings.Split(*sources, ",") {
		if s != "" {
			src, err := parseIP(s, "-sources entry")
			if err != nil {
				return err
			}
			c.sources = append(c.sources, src)
		}
	}
	if *rate <= 0 || *duration <= 0 || *deadlineMS <= 0 || *timeoutMS < *deadlineMS || *write < 0 {
		return errors.New("need -rate > 0, -duration > 0, -deadline > 0, -timeout >= -deadline, -write >= 0")
	}
	if c.epfd, err = syscall.EpollCreate1(syscall.EPOLL_CLOEXEC); err != nil {
		return err
	}
	n := int(math.Round(*rate * *duration))
	c.out = make([]result, 0, n)
	window, elapsed, maxInflight, err := c.run(n, *rate, *duration)
	if err != nil {
		return err
	}

	s := summarize(c.out, msDuration(*deadlineMS))
	out := report{Mode: "client", Target: *target, Ports: *portSpec, Sources: *sources,
		RateTarget: *rate, DurationS: *duration, DeadlineMS: *deadlineMS, TimeoutMS: *timeoutMS,
		WriteBytes: *write, Attempted: n, OK: s.ok, Failed: s.failed, Late: s.late,
		AchievedRate: round(float64(n)/window.Seconds(), 1), LatencyUS: s.latency,
		Errors: s.errors, ErrorSamples: s.samples, UniqueTuples: s.unique,
		ScheduleLagUS: s.lag, MaxLagMS: *maxLagMS, MaxInflight: maxInflight,
		WindowS: round(window.Seconds(), 3), ElapsedS: round(elapsed.Seconds(), 3)}
	if n > 0 {
		out.LossPct = round(100*float64(s.failed+s.late)/float64(n), 4)
	}
	out.ScheduleKept = s.lag == nil || float64(s.lag.Max) <= *maxLagMS*1000
	out.ProcessCPUS, out.RunqueueWaitS = schedstat()
	if *asJSON {
		printJSON(out)
	} else {
		out.print()
	}
	return nil
}

// run is the event loop: start every due connection, end the finished and timed-out
// ones, wait in epoll for events or 1 ms.
func (c *client) run(n int, rate, duration float64) (window, elapsed time.Duration, maxInflight int, err error) {
	period := float64(time.Second) / rate
	dueAt := func(i int) time.Duration { return time.Duration(float64(i) * period) }
	end := time.Duration(duration * float64(time.Second))
	events := make([]syscall.EpollEvent, 1024)
	t0 := time.Now()
	for i := 0; ; {
		now := time.Now()
		for ; i < n && dueAt(i) <= now.Sub(t0); i++ {
			c.start(i, t0.Add(dueAt(i)))
		}
		if i == n && window == 0 && now.Sub(t0) >= end {
			window = now.Sub(t0) // the schedule's window is [0, duration) even if its last slot is empty
		}
		c.expire(now)
		if len(c.pending) > maxInflight {
			maxInflight = len(c.pending)
		}
		if window != 0 && len(c.pending) == 0 {
			return window, time.Since(t0), maxInflight, nil
		}
		ready, err := epollWait(c.epfd, events, int(slot/time.Millisecond))
		if err != nil {
			return 0, 0, 0, err
		}
		for _, ev := range ready {
			c.finish(int(ev.Fd))
		}
	}
}

var errTimeout = errors.New("connect timed out")

// start opens connection i: socket, SO_LINGER 0, optional bind, non-blocking connect.
func (c *client) start(i int, due time.Time) {
	k := i % len(c.ports)
	sa, family := sockaddr(c.target, c.ports[k])
	a := &attempt{fd: -1, idx: len(c.out), start: time.Now()}
	c.out = append(c.out, result{lag: a.start.Sub(due), dport: uint16(c.ports[k])})
	fd, err := syscall.Socket(family, syscall.SOCK_STREAM|syscall.SOCK_NONBLOCK|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		c.end(a, err)
		return
	}
	a.fd = fd
	err = syscall.SetsockoptLinger(fd, syscall.SOL_SOCKET, syscall.SO_LINGER, &syscall.Linger{Onoff: 1})
	if err == nil && len(c.sources) > 0 {
		// the source port is then chosen at connect(), free for this destination
		_ = syscall.SetsockoptInt(fd, syscall.IPPROTO_IP, ipBindAddressNoPort, 1)
		src, _ := sockaddr(c.sources[(i/len(c.ports))%len(c.sources)], 0)
		err = syscall.Bind(fd, src)
	}
	if err == nil {
		err = syscall.Connect(fd, sa)
	}
	if err == syscall.EINPROGRESS {
		if err = epollAdd(c.epfd, fd, syscall.EPOLLOUT); err == nil {
			c.pending[fd] = a
			c.queue = append(c.queue, a)
			return
		}
	}
	c.end(a, err) // failed, or (err == nil) connected at once
}

// finish handles the epoll event of a connecting socket: connected or failed.
func (c *client) finish(fd int) {
	a := c.pending[fd]
	if a == nil {
		return
	}
	soerr, err := syscall.GetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_ERROR)
	if err == nil && soerr != 0 {
		err = syscall.Errno(soerr)
	}
	c.end(a, err)
}

// expire ends the connects older than the timeout (the queue is in start order).
func (c *client) expire(now time.Time) {
	for len(c.queue) > 0 {
		a := c.queue[0]
		if !a.done && now.Sub(a.start) < c.timeout {
			return
		}
		c.queue[0], c.queue = nil, c.queue[1:]
		if !a.done {
			c.end(a, errTimeout)
		}
	}
}

// end records how attempt a ended (err nil: connected), writes the payload if any and
// closes the socket with a RST (SO_LINGER 0).
func (c *client) end(a *attempt, err error) {
	r := &c.out[a.idx]
	r.lat = time.Since(a.start)
	if err == nil {
		if sa, e := syscall.Getsockname(a.fd); e == nil {
			r.src = addrPort(sa)
		}
		if len(c.payload) > 0 {
			_, err = syscall.Write(a.fd, c.payload)
		}
	}
	if err != nil {
		r.class, r.msg = classify(err), err.Error()
	}
	if a.fd >= 0 {
		delete(c.pending, a.fd)
		syscall.Close(a.fd) // also leaves the epoll set
	}
	a.done = true
}

// schedstat sums, over this process's threads, the seconds they ran and the seconds they
// waited for a CPU: other load on the generator's CPU, which includes ksoftirqd doing
// this traffic's own packet processing when softirqs are busy.
func schedstat() (run, wait float64) {
	tasks, _ := os.ReadDir("/proc/self/task")
	for _, t := range tasks {
		b, err := os.ReadFile("/proc/self/task/" + t.Name() + "/schedstat")
		var r, w int64
		if _, e := fmt.Sscan(string(b), &r, &w); err == nil && e == nil {
			run, wait = run+float64(r)/1e9, wait+float64(w)/1e9
		}
	}
	return round(run, 3), round(wait, 3)
}

func msDuration(ms float64) time.Duration { return time.Duration(ms * float64(time.Millisecond)) }

func round(x float64, digits int) float64 {
	p := math.Pow(10, float64(digits))
	return math.Round(x*p) / p
}

func classify(err error) string {
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return "refused"
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return "reset"
	case errors.Is(err, errTimeout), errors.Is(err, syscall.ETIMEDOUT):
		return "timeout"
	case errors.Is(err, syscall.EADDRNOTAVAIL), errors.Is(err, syscall.EADDRINUSE):
		return "no_port" // ephemeral ports exhausted
	case errors.Is(err, syscall.EMFILE), errors.Is(err, syscall.ENFILE):
		return "no_fd"
	case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		return "unreachable"
	}
	return "other"
}

// ---- results ---------------------------------------------------------------

type percentiles struct {
	P50  int64   `json:"p50"`
	P90  int64   `json:"p90"`
	P99  int64   `json:"p99"`
	P999 int64   `json:"p999"`
	Max  int64   `json:"max"`
	Mean float64 `json:"mean"`
}

type summary struct {
	ok, failed, late, unique int
	latency, lag             *percentiles
	errors                   map[string]int
	samples                  map[string]string
}

type report struct {
	Mode          string            `json:"mode"`
	Target        string            `json:"target"`
	Ports         string            `json:"ports"`
	Sources       string            `json:"sources"`
	RateTarget    float64           `json:"rate_target"`
	DurationS     float64           `json:"duration_s"`
	DeadlineMS    float64           `json:"deadline_ms"`
	TimeoutMS     float64           `json:"timeout_ms"`
	WriteBytes    int               `json:"write_bytes"`
	Attempted     int               `json:"attempted"`
	OK            int               `json:"ok"`
	Failed        int               `json:"failed"`
	Late          int               `json:"late"`
	LossPct       float64           `json:"loss_pct"`
	AchievedRate  float64           `json:"achieved_rate"`
	LatencyUS     *percentiles      `json:"latency_us"`
	Errors        map[string]int    `json:"errors"`
	ErrorSamples  map[string]string `json:"error_samples"`
	UniqueTuples  int               `json:"unique_tuples"`
	ScheduleKept  bool              `json:"schedule_kept"`
	ScheduleLagUS *percentiles      `json:"schedule_lag_us"`
	MaxLagMS      float64           `json:"max_lag_ms"`
	MaxInflight   int               `json:"max_inflight"`
	WindowS       float64           `json:"window_s"`
	ElapsedS      float64           `json:"elapsed_s"`
	ProcessCPUS   float64           `json:"process_cpu_s"`   // this process's CPU time
	RunqueueWaitS float64           `json:"runqueue_wait_s"` // runnable but not running
}

func (r *report) print() {
	fmt.Printf("rate %g/s for %gs: attempted %d (%.1f/s), ok %d, late %d, failed %d, loss %.4g%%\n",
		r.RateTarget, r.DurationS, r.Attempted, r.AchievedRate, r.OK, r.Late, r.Failed, r.LossPct)
	if l := r.LatencyUS; l != nil {
		fmt.Printf("connect latency us: p50 %d p90 %d p99 %d p99.9 %d max %d mean %.1f\n",
			l.P50, l.P90, l.P99, l.P999, l.Max, l.Mean)
	}
	if len(r.Errors) > 0 {
		fmt.Printf("errors: %v (e.g. %v)\n", r.Errors, r.ErrorSamples)
	}
	if l := r.ScheduleLagUS; l != nil {
		fmt.Printf("schedule kept: %v (lag us p50 %d p99 %d max %d), unique 5-tuples %d, max in flight %d\n",
			r.ScheduleKept, l.P50, l.P99, l.Max, r.UniqueTuples, r.MaxInflight)
	}
	fmt.Printf("process CPU %.3f s, waited for a CPU %.3f s\n", r.ProcessCPUS, r.RunqueueWaitS)
}

// tupleSet counts distinct (source address, source port, destination port) with one
// 64 Ki-bit bitmap per (source address, destination port).
type tupleSet map[netip.AddrPort]*[1024]uint64

func (t tupleSet) add(src netip.AddrPort, dport uint16) bool {
	key := netip.AddrPortFrom(src.Addr(), dport)
	bits := t[key]
	if bits == nil {
		bits = new([1024]uint64)
		t[key] = bits
	}
	w, b := src.Port()/64, uint64(1)<<(src.Port()%64)
	fresh := bits[w]&b == 0
	bits[w] |= b
	return fresh
}

func summarize(results []result, deadline time.Duration) *summary {
	s := &summary{errors: map[string]int{}, samples: map[string]string{}}
	lats := make([]time.Duration, 0, len(results))
	lags := make([]time.Duration, 0, len(results))
	seen := tupleSet{}
	for _, r := range results {
		lags = append(lags, r.lag)
		if r.src.IsValid() {
			lats = append(lats, r.lat)
			if seen.add(r.src, r.dport) {
				s.unique++
			}
		}
		switch {
		case r.class != "":
			s.failed++
			s.errors[r.class]++
			if s.samples[r.class] == "" {
				s.samples[r.class] = r.msg
			}
		case r.lat > deadline:
			s.late++
		default:
			s.ok++
		}
	}
	s.latency, s.lag = stats(lats), stats(lags)
	return s
}

// stats gives nearest-rank percentiles in microseconds, nil without samples.
func stats(xs []time.Duration) *percentiles {
	if len(xs) == 0 {
		return nil
	}
	sort.Slice(xs, func(i, j int) bool { return xs[i] < xs[j] })
	at := func(p float64) int64 {
		i := int(math.Ceil(p*float64(len(xs)))) - 1
		if i < 0 {
			i = 0
		}
		return xs[i].Microseconds()
	}
	var sum time.Duration
	for _, x := range xs {
		sum += x
	}
	return &percentiles{P50: at(0.50), P90: at(0.90), P99: at(0.99), P999: at(0.999),
		Max:  xs[len(xs)-1].Microseconds(),
		Mean: round(float64(sum.Microseconds())/float64(len(xs)), 1)}
}
