package main

import (
	"errors"
	"fmt"
	"net/netip"
	"reflect"
	"syscall"
	"testing"
	"time"
)

func TestParsePorts(t *testing.T) {
	got, err := parsePorts("5000-5002,6000")
	if err != nil || !reflect.DeepEqual(got, []int{5000, 5001, 5002, 6000}) {
		t.Fatalf("parsePorts = %v, %v", got, err)
	}
	for _, bad := range []string{"", "0", "5002-5000", "70000", "5000-", "a-b", "5000,,5001"} {
		if _, err := parsePorts(bad); err == nil {
			t.Errorf("parsePorts(%q) accepted", bad)
		}
	}
}

func TestStatsNearestRank(t *testing.T) {
	var xs []time.Duration
	for i := 1000; i >= 1; i-- {
		xs = append(xs, time.Duration(i)*time.Microsecond)
	}
	got := stats(xs)
	want := percentiles{P50: 500, P90: 900, P99: 990, P999: 999, Max: 1000, Mean: 500.5}
	if *got != want {
		t.Fatalf("stats = %+v, want %+v", *got, want)
	}
	if stats(nil) != nil {
		t.Fatal("stats(nil) should be nil")
	}
}

func TestClassify(t *testing.T) {
	cases := map[error]string{
		syscall.ECONNREFUSED: "refused", syscall.ECONNRESET: "reset", syscall.EPIPE: "reset",
		errTimeout: "timeout", syscall.ETIMEDOUT: "timeout", syscall.EADDRNOTAVAIL: "no_port",
		syscall.EMFILE: "no_fd", syscall.EHOSTUNREACH: "unreachable", errors.New("x"): "other",
		fmt.Errorf("wrapped: %w", syscall.ECONNREFUSED): "refused",
	}
	for err, want := range cases {
		if got := classify(err); got != want {
			t.Errorf("classify(%v) = %q, want %q", err, got, want)
		}
	}
}

func TestSummarize(t *testing.T) {
	src := netip.MustParseAddrPort("198.18.98.1:40000")
	ms := time.Millisecond
	results := []result{
		{lat: 1 * ms, src: src, dport: 5000},                       // ok
		{lat: 2 * ms, src: src, dport: 5001},                       // ok, another 5-tuple
		{lat: 1 * ms, src: src, dport: 5000},                       // ok, the first 5-tuple again
		{lat: 1500 * ms, src: src, dport: 5002},                    // late
		{lat: 3 * ms, class: "refused", msg: "connection refused"}, // failed
		{lat: 3000 * ms, class: "timeout", msg: "connect timed out", lag: 20 * ms},
	}
	s := summarize(results, time.Second)
	if s.ok != 3 || s.late != 1 || s.failed != 2 || s.unique != 3 {
		t.Fatalf("ok/late/failed/unique = %d/%d/%d/%d", s.ok, s.late, s.failed, s.unique)
	}
	if !reflect.DeepEqual(s.errors, map[string]int{"refused": 1, "timeout": 1}) {
		t.Fatalf("errors = %v", s.errors)
	}
	if s.latency.Max != 1500000 || s.lag.Max != 20000 { // connected ones only; every start
		t.Fatalf("latency max %d, lag max %d", s.latency.Max, s.lag.Max)
	}
}
