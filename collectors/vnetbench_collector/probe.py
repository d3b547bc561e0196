"""The interrupt-time probe: network softirq and hardirq time per CPU and per
interrupted task, measured at entry/exit with eBPF (bpftrace), for kernels whose
task CPU time also holds the interrupts that ran on its back (no
CONFIG_IRQ_TIME_ACCOUNTING).

bpftrace runs ``PROGRAM``: on ``irq:softirq_entry``/``exit`` of the NET_TX and
NET_RX vectors and ``irq:irq_handler_entry``/``exit`` it adds the time spent to
``[cpu, tid]`` of the task that was interrupted (the current task: ksoftirqd
when it runs softirqs itself, tid 0 when the CPU was idle). A hardirq that
arrives during a softirq is taken out of that softirq (nesting-safe; softirqs do
not nest on a CPU). Every interval it flips between two map generations and
prints the one just closed, so no event is lost between print and clear.

``python -m vnetbench_collector.probe_runner --out FILE`` runs bpftrace as its child,
sums the deltas and rewrites FILE (JSON, atomically) after every interval with
cumulative nanoseconds and the kernel time (CLOCK_MONOTONIC) of the interval's
end. Readers interpolate between two successive snapshots (``Snapshot``).
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Iterator

NET_TX, NET_RX = 2, 3                  # softirq vector numbers (include/linux/interrupt.h)
DEFAULT_INTERVAL_MS = 100
TRACEFS = Path("/sys/kernel/tracing")
SNAPSHOT_VERSION = 1
PRUNE_EVERY_S = 5.0

PROGRAM = """\
BEGIN { @gen = 0; printf("{\\"start\\": %lld, \\"mark\\": \\"%s\\"}\\n", nsecs, str($1)); }
tracepoint:irq:softirq_entry /args->vec == 2 || args->vec == 3/ {
  @ss[cpu] = nsecs; @sh[cpu] = @hsum[cpu];
}
tracepoint:irq:softirq_exit /(args->vec == 2 || args->vec == 3) && @ss[cpu]/ {
  $d = nsecs - @ss[cpu] - (@hsum[cpu] - @sh[cpu]);
  if (@gen == 0) { @s0[cpu, tid] = sum($d); } else { @s1[cpu, tid] = sum($d); }
  delete(@ss[cpu]);
}
tracepoint:irq:irq_handler_entry { @hs[cpu] = nsecs; }
tracepoint:irq:irq_handler_exit /@hs[cpu]/ {
  $d = nsecs - @hs[cpu];
  if (@gen == 0) { @h0[cpu, tid] = sum($d); } else { @h1[cpu, tid] = sum($d); }
  @hsum[cpu] = @hsum[cpu] + $d;
  delete(@hs[cpu]);
}
PROFILEinterval:ms:INTERVAL {
  @gen = 1 - @gen;
  printf("{\\"t\\": %lld}\\n", nsecs);
  if (@gen == 1) { print(@s0); print(@h0); clear(@s0); clear(@h0);PRINT0 }
  else { print(@s1); print(@h1); clear(@s1); clear(@h1);PRINT1 }
  printf("{\\"end\\": 1}\\n");
}
END { clear(@ss); clear(@sh); clear(@hs); clear(@hsum); clear(@gen);
      clear(@s0); clear(@s1); clear(@h0); clear(@h1);CLEAR }
"""
# The router sampler (``profile_hz``): a timer sample on every CPU at a fixed rate, counted
# per (cpu, kernel stack); the runner classifies the stacks (``is_router``). Its cost is
# constant (rate x CPUs), not per packet: kfunc/fentry is not available on every kernel
# and a kprobe pair on every forwarded packet costs microseconds per packet.
PROFILE = """\
profile:hz:HZ { if (@gen == 0) { @k0[cpu, kstack] = count(); } else { @k1[cpu, kstack] = count(); } }
"""
DEFAULT_PROFILE_HZ = 997               # prime: never in step with the 1 kHz or 250 Hz tick
# The kernel's IP forwarding: a sample whose stack holds one of these is the router's
# (ip_forward and what it calls: FORWARD/POSTROUTING hooks, NAT, neighbour, the
# transmit onto the next link). The input side before ip_forward (the receive, PREROUTING,
# the route lookup in ip_rcv_finish) is not in it.
FORWARD_FUNCTIONS = frozenset({"ip_forward", "ip_forward_finish", "ip6_forward",
                               "ip6_forward_finish"})


def program(interval_ms: int = DEFAULT_INTERVAL_MS, profile_hz: int = 0) -> str:
    """The probe's bpftrace program; with ``profile_hz`` the router sampler too."""
    on = bool(profile_hz)
    return (PROGRAM.replace("PROFILE", PROFILE.replace("HZ", str(int(profile_hz))) if on else "")
            .replace("PRINT0", " print(@k0); clear(@k0);" if on else "")
            .replace("PRINT1", " print(@k1); clear(@k1);" if on else "")
            .replace("CLEAR", " clear(@k0); clear(@k1);" if on else "")
            .replace("INTERVAL", str(int(interval_ms))))


def bpftrace_argv(mark: str, interval_ms: int = DEFAULT_INTERVAL_MS,
                  bpftrace: str = "bpftrace", profile_hz: int = 0) -> list[str]:
    """bpftrace with the program inline; ``mark`` (a run-unique path) is its one
    positional argument, so the process can be told apart from any other bpftrace."""
    return [bpftrace, "-f", "json", "-e", program(interval_ms, profile_hz), mark]


def is_router(stack: str) -> bool:
    """Whether a kernel stack as bpftrace prints it ("    func+off\\n" per frame) is in
    the kernel's IP forwarding (``FORWARD_FUNCTIONS``)."""
    return any(f.strip().split("+", 1)[0] in FORWARD_FUNCTIONS for f in stack.splitlines())


def _stacks(values: dict) -> dict[int, tuple[int, int]]:
    """cpu -> (samples, router samples) of one interval's ``@k`` map ("cpu,stack" -> n)."""
    out: dict = {}
    for key, n in values.items():
        cpu, _, stack = key.partition(",")
        total, router = out.get(int(cpu), (0, 0))
        out[int(cpu)] = (total + int(n), router + (int(n) if is_router(stack) else 0))
    return out


@dataclass
class Delta:
    """One interval as bpftrace printed it: ns per (cpu, tid), ending at t_ns."""
    t_ns: int
    softirq: dict = field(default_factory=dict)
    hardirq: dict = field(default_factory=dict)
    samples: dict = field(default_factory=dict)      # cpu -> (samples, router samples)


def _keyed(values: dict) -> dict[tuple[int, int], int]:
    out = {}
    for key, ns in values.items():
        cpu, tid = key.split(",")
        out[(int(cpu), int(tid))] = int(ns)
    return out


def parse(lines: Iterable[str]) -> Iterator[Delta]:
    """The intervals of bpftrace's JSON output (``-f json``), each yielded as soon as
    its end marker is read. Lines that are not the program's (warnings, the
    attach count, the start line) are skipped."""
    current = None
    for line in lines:
        try:
            event = json.loads(line)
        except json.JSONDecodeError:
            continue
        kind, data = event.get("type"), event.get("data")
        if kind == "printf":
            try:
                fields = json.loads(data)
            except (TypeError, json.JSONDecodeError):
                continue
            if "t" in fields:
                current = Delta(int(fields["t"]))
            elif "end" in fields and current is not None:
                yield current
                current = None
        elif kind == "map" and current is not None and isinstance(data, dict):
            for name, values in data.items():
                if name in ("@s0", "@s1"):
                    current.softirq = _keyed(values)
                elif name in ("@h0", "@h1"):
                    current.hardirq = _keyed(values)
                elif name in ("@k0", "@k1"):
                    current.samples = _stacks(values)


@dataclass
class Accumulator:
    """Cumulative ns since the probe started: per CPU (every context, forever) and
    per (cpu, tid) for tasks still alive (``prune`` drops exited ones, so the file
    stays as small as the set of live tasks that saw network interrupts)."""
    start_ns: int
    interval_ns: int
    t_ns: int = 0
    seq: int = 0
    softirq: dict = field(default_factory=dict)
    hardirq: dict = field(default_factory=dict)
    softirq_cpu: dict = field(default_factory=dict)
    hardirq_cpu: dict = field(default_factory=dict)
    profile_hz: int = 0
    samples_cpu: dict = field(default_factory=dict)          # cpu -> samples, every context
    router_samples_cpu: dict = field(default_factory=dict)   # cpu -> samples in IP forwarding

    def add(self, d: Delta) -> None:
        for mine, per_cpu, theirs in ((self.softirq, self.softirq_cpu, d.softirq),
                                      (self.hardirq, self.hardirq_cpu, d.hardirq)):
            for (cpu, tid), ns in theirs.items():
                mine[(cpu, tid)] = mine.get((cpu, tid), 0) + ns
                per_cpu[cpu] = per_cpu.get(cpu, 0) + ns
        for cpu, (total, router) in d.samples.items():
            self.samples_cpu[cpu] = self.samples_cpu.get(cpu, 0) + total
            self.router_samples_cpu[cpu] = self.router_samples_cpu.get(cpu, 0) + router
        self.t_ns, self.seq = d.t_ns, self.seq + 1

    def prune(self, alive) -> None:
        """Forget (cpu, tid) of tasks for which ``alive(tid)`` is false (never the idle tid 0)."""
        for table in (self.softirq, self.hardirq):
            for key in [k for k in table if k[1] and not alive(k[1])]:
                del table[key]

    def snapshot(self) -> dict:
        keyed = lambda d: {f"{c},{t}": ns for (c, t), ns in sorted(d.items())}
        return {"version": SNAPSHOT_VERSION, "seq": self.seq, "t_ns": self.t_ns,
                "start_ns": self.start_ns, "interval_ns": self.interval_ns,
                "softirq_cpu": {str(c): ns for c, ns in sorted(self.softirq_cpu.items())},
                "hardirq_cpu": {str(c): ns for c, ns in sorted(self.hardirq_cpu.items())},
                "softirq": keyed(self.softirq), "hardirq": keyed(self.hardirq),
                "profile_hz": self.profile_hz,
                "samples_cpu": {str(c): n for c, n in sorted(self.samples_cpu.items())},
                "router_samples_cpu": {str(c): n for c, n in sorted(self.router_samples_cpu.items())}}


@dataclass(frozen=True)
class Snapshot:
    """One snapshot file as read back: cumulative ns at kernel time ``t_ns``."""
    seq: int
    t_ns: int
    start_ns: int
    interval_ns: int
    softirq: dict          # (cpu, tid) -> ns
    hardirq: dict
    softirq_cpu: dict      # cpu -> ns
    hardirq_cpu: dict
    profile_hz: int = 0    # the router sampler's rate; 0: not sampling
    samples_cpu: dict = field(default_factory=dict)          # cpu -> samples
    router_samples_cpu: dict = field(default_factory=dict)   # cpu -> samples in IP forwarding

    @classmethod
    def from_dict(cls, doc: dict) -> "Snapshot":
        if doc.get("version") != SNAPSHOT_VERSION:
            raise ValueError(f"probe snapshot version {doc.get('version')!r}, "
                             f"expected {SNAPSHOT_VERSION}")
        cpus = lambda d: {int(c): int(ns) for c, ns in d.items()}
        return cls(seq=int(doc["seq"]), t_ns=int(doc["t_ns"]),
                   start_ns=int(doc["start_ns"]), interval_ns=int(doc["interval_ns"]),
                   softirq=_keyed(doc["softirq"]), hardirq=_keyed(doc["hardirq"]),
                   softirq_cpu=cpus(doc["softirq_cpu"]), hardirq_cpu=cpus(doc["hardirq_cpu"]),
                   profile_hz=int(doc.get("profile_hz", 0)),
                   samples_cpu=cpus(doc.get("samples_cpu", {})),
                   router_samples_cpu=cpus(doc.get("router_samples_cpu", {})))


def read_snapshot(path: Path | str) -> Snapshot | None:
    """The probe's latest snapshot, or None when there is none (yet)."""
    try:
        with open(path) as f:
            doc = json.load(f)
    except (OSError, json.JSONDecodeError):
        return None
    try:
        snap = Snapshot.from_dict(doc)
    except (KeyError, ValueError, TypeError):
        return None
    return snap if snap.seq > 0 else None


def fresh(snap: Snapshot | None, now_ns: int | None = None) -> Snapshot | None:
    """``snap`` if the probe is still publishing (its last snapshot is at most a few
    intervals old), else None."""
    now_ns = time.monotonic_ns() if now_ns is None else now_ns
    if snap is None or now_ns - snap.t_ns > 5 * snap.interval_ns + 1_000_000_000:
        return None
    return snap


def following(path: Path | str, lo: Snapshot, t_ns: int, timeout_s: float | None = None,
              poll_s: float = 0.005) -> Snapshot | None:
    """The first snapshot at or after kernel time ``t_ns`` of the same probe run as ``lo``
    (read before ``t_ns`` was taken, so lo.t_ns <= t_ns <= result.t_ns); waits about one
    interval at most. None if the probe stopped or restarted meanwhile."""
    timeout_s = timeout_s if timeout_s is not None else 3 * lo.interval_ns / 1e9 + 0.2
    deadline = time.monotonic() + timeout_s
    while True:
        hi = read_snapshot(path)
        if hi is not None and hi.start_ns != lo.start_ns:
            return None                       # the probe restarted: counters began again
        if hi is not None and hi.t_ns >= t_ns:
            return hi
        if time.monotonic() > deadline:
            return None
        time.sleep(poll_s)


# --------------------------------------------------------------------------- the runner

def _parent_death_signal() -> None:
    """In the child: SIGTERM when the runner dies, even by SIGKILL (prctl PR_SET_PDEATHSIG)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(1, signal.SIGTERM, 0, 0, 0)


def mount_tracefs() -> None:
    """bpftrace resolves tracepoints through tracefs; mount it when it is not."""
    if (TRACEFS / "events").is_dir():
        return
    subprocess.run(["mount", "-t", "tracefs", "nodev", str(TRACEFS)], capture_output=True,
                   timeout=10, check=False)


def write_json(path: Path, doc: dict) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(doc))
    tmp.replace(path)


def run(out: Path, child_pidfile: Path | None, interval_ms: int, bpftrace: str,
        profile_hz: int = 0) -> int:
    """Run bpftrace, keep ``out`` current; returns bpftrace's exit status."""
    mount_tracefs()
    argv = bpftrace_argv(str(out), interval_ms, bpftrace, profile_hz)
    child = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                             stdin=subprocess.DEVNULL, text=True, bufsize=1,
                             preexec_fn=_parent_death_signal)
    if child_pidfile:
        child_pidfile.write_text(f"{child.pid}\n")

    def stop(signum, frame):
        child.terminate()
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    acc = Accumulator(start_ns=time.monotonic_ns(), interval_ns=interval_ms * 1_000_000,
                      profile_hz=profile_hz)
    next_prune = time.monotonic() + PRUNE_EVERY_S
    for delta in parse(child.stdout):
        acc.add(delta)
        if time.monotonic() >= next_prune:
            acc.prune(lambda tid: os.path.exists(f"/proc/{tid}"))
            next_prune = time.monotonic() + PRUNE_EVERY_S
        write_json(out, acc.snapshot())
    return child.wait()


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m vnetbench_collector.probe_runner",
                                description="Network softirq and hardirq time per CPU and "
                                "interrupted task (eBPF through bpftrace), kept in a JSON file.")
    p.add_argument("--out", type=Path, required=True, help="the snapshot file to keep current")
    p.add_argument("--child-pidfile", type=Path, help="write bpftrace's pid here")
    p.add_argument("--interval-ms", type=int, default=DEFAULT_INTERVAL_MS,
                   help=f"snapshot interval (default {DEFAULT_INTERVAL_MS})")
    p.add_argument("--bpftrace", default="bpftrace", help="the bpftrace executable")
    p.add_argument("--router-profile-hz", type=int, default=0,
                   help="also sample kernel stacks at this rate per CPU and count those in IP "
                   f"forwarding (the router's CPU; {DEFAULT_PROFILE_HZ} is a good rate; 0: off)")
    args = p.parse_args(argv)
    if not shutil.which(args.bpftrace):
        print(f"probe: {args.bpftrace} not found; install it (Debian: apt-get install bpftrace)",
              file=sys.stderr)
        raise SystemExit(2)
    if not 10 <= args.interval_ms <= 10_000:
        print("probe: --interval-ms must be between 10 and 10000", file=sys.stderr)
        raise SystemExit(2)
    if not 0 <= args.router_profile_hz <= 10_000:
        print("probe: --router-profile-hz must be between 0 (off) and 10000", file=sys.stderr)
        raise SystemExit(2)
    raise SystemExit(run(args.out, args.child_pidfile, args.interval_ms, args.bpftrace,
                         args.router_profile_hz))


if __name__ == "__main__":
    main()
