"""Pure /proc readers. Every function takes the ``proc`` root as a Path, so tests
run against fake trees. Times are returned in seconds (clock ticks / CLK_TCK).

A process or thread that vanishes while it is read is skipped, never an error.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Iterator

# Processes of a vSwitch on a compute node, looked up by exact executable name
# (OpenFlow controllers are Python programs: found by the comm they set, e.g.
# vnetbench.sdn.controller sets "osken-manager").
VSWITCH_PROCESSES = ("ovs-vswitchd", "ovsdb-server", "ovn-controller", "contrail-vrouter-agent",
                     "osken-manager", "ryu-manager")
# QEMU executables; all are exported as component "qemu".
QEMU_PROCESSES = ("qemu-system-x86_64", "qemu-system-aarch64", "qemu-kvm")
QEMU = "qemu"
# Kernel threads are children of kthreadd (pid 2).
KTHREADD = 2

# ovs-vswitchd thread name prefixes -> thread class. Any other thread (the main
# thread itself, ct_clean, ipf_clean, ...) is "main". PMD threads are named
# "pmd12" (older OVS) or "pmd-c03/id:7" (newer); both start with "pmd".
OVS_THREAD_CLASSES = (("handler", "handler"), ("revalidator", "revalidator"),
                      ("pmd", "pmd"), ("urcu", "urcu"))
# Processes other than ovs-vswitchd are not split by thread.
ALL_THREADS = "all"

COMM_LEN = 15                     # the kernel truncates /proc/PID/comm to 15 bytes
SOFTIRQ_TYPES = ("NET_RX", "NET_TX")


def clk_tck() -> int:
    return os.sysconf("SC_CLK_TCK")


def thread_class(comm: str, process: str) -> str:
    """Class of one thread: main/handler/revalidator/pmd/urcu for ovs-vswitchd;
    for qemu vcpu ("CPU 0/KVM", or "CPU 0/TCG" where QEMU emulates the CPU), vhost (the
    "vhost-PID" workers that kernels >= 6.4 run inside QEMU), iothread ("IO <id>") or
    emulator (the main loop, which runs the user-space virtio-net backend without
    vhost, and its workers); ``"all"`` for the threads of any other process."""
    if process == QEMU:
        if re.fullmatch(r"CPU \d+/(KVM|TCG)", comm):
            return "vcpu"
        if comm.startswith("vhost-"):
            return "vhost"
        return "iothread" if comm.startswith("IO ") else "emulator"
    if process != "ovs-vswitchd":
        return ALL_THREADS
    for prefix, name in OVS_THREAD_CLASSES:
        if comm.startswith(prefix):
            return name
    return "main"


@dataclass(frozen=True)
class ThreadCpu:
    tid: int
    comm: str
    start: int          # start time in ticks since boot: tells a reused tid apart
    seconds: float      # utime + stime
    ppid: int = 0


def parse_stat(text: str, hz: int) -> ThreadCpu:
    """One /proc/PID[/task/TID]/stat line. comm may hold spaces and parentheses."""
    head, tail = text.rsplit(")", 1)
    pid, comm = head.split("(", 1)
    fields = tail.split()            # fields[0] is field 3 (state) of proc(5)
    utime, stime, start = int(fields[11]), int(fields[12]), int(fields[19])
    return ThreadCpu(tid=int(pid), comm=comm, start=start, seconds=(utime + stime) / hz,
                     ppid=int(fields[1]))


def _read(path: Path | str) -> str | None:
    """A whole /proc file, or None if it is gone. Plain os calls: a scrape reads one
    file per process, and pathlib's per-call overhead is most of that cost."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        chunks = []
        while chunk := os.read(fd, 65536):
            chunks.append(chunk)
        return b"".join(chunks).decode()
    except (OSError, UnicodeDecodeError):
        return None
    finally:
        os.close(fd)


def _stats(paths: Iterable[Path | str], hz: int) -> list[ThreadCpu]:
    """The parsed stat files among ``paths`` that still exist and parse."""
    out = []
    for path in paths:
        text = _read(path)
        if not text:
            continue
        try:
            out.append(parse_stat(text, hz))
        except (ValueError, IndexError):
            continue
    return out


def process_cpu(proc: Path, pid: int, hz: int | None = None) -> ThreadCpu | None:
    """CPU seconds of a whole process (live and exited threads), or None if gone."""
    text = _read(proc / str(pid) / "stat")
    try:
        return parse_stat(text, hz or clk_tck()) if text else None
    except (ValueError, IndexError):
        return None


def thread_cpu(proc: Path, pid: int, hz: int | None = None) -> list[ThreadCpu]:
    """CPU seconds of every live thread of ``pid`` (from /proc/PID/task/TID/stat)."""
    try:
        tasks = sorted((proc / str(pid) / "task").iterdir())
    except OSError:
        return []
    return _stats((task / "stat" for task in tasks), hz or clk_tck())


def softirq_seconds(proc: Path, hz: int | None = None) -> dict[int, float]:
    """Softirq time per CPU from /proc/stat (7th value of each ``cpuN`` line)."""
    hz = hz or clk_tck()
    out = {}
    for line in (proc / "stat").read_text().splitlines():
        m = re.match(r"cpu(\d+)\s", line)
        if m:                             # cpuN user nice system idle iowait irq softirq ...
            out[int(m.group(1))] = int(line.split()[7]) / hz
    return out


def softirq_counts(proc: Path, types: Iterable[str] = SOFTIRQ_TYPES) -> dict[str, dict[int, int]]:
    """Softirq counts per type and CPU from /proc/softirqs: {"NET_RX": {0: n, ...}, ...}."""
    lines = (proc / "softirqs").read_text().splitlines()
    if not lines:
        return {}
    cpus = [int(c[3:]) for c in lines[0].split() if c.startswith("CPU")]
    wanted = set(types)
    out = {}
    for line in lines[1:]:
        name, _, values = line.partition(":")
        name = name.strip()
        if name in wanted:
            out[name] = {cpu: int(v) for cpu, v in zip(cpus, values.split())}
    return out


def _pids(proc: Path) -> Iterator[int]:
    try:
        entries = os.listdir(proc)
    except OSError:
        return
    for name in entries:
        if name.isdigit():
            yield int(name)


def scan(proc: Path, hz: int | None = None) -> list[ThreadCpu]:
    """One pass over /proc: the stat line (name, parent, CPU time) of every process."""
    return _stats((f"{proc}/{pid}/stat" for pid in _pids(proc)), hz or clk_tck())


def _exe(proc: Path, pid: int) -> str:
    try:
        return os.path.basename(os.readlink(proc / str(pid) / "exe")).removesuffix(" (deleted)")
    except OSError:
        return ""


def match_name(proc: Path, pid: int, comm: str, names: Iterable[str]) -> str | None:
    """The one of ``names`` that process ``pid`` runs: its comm exactly, or, when comm
    is the kernel's 15-byte truncation of a longer name, confirmed by the basename of
    /proc/PID/exe (read only then)."""
    for name in names:
        if comm == name and len(name) <= COMM_LEN:
            return name
    for name in names:
        if name.startswith(comm) and len(name) > len(comm) and _exe(proc, pid) == name:
            return name
    return None


def process_name(proc: Path, pid: int) -> str | None:
    """A process's name: its comm when that is a known vSwitch process (a Python
    controller names itself, e.g. osken-manager, while its exe is the interpreter),
    "qemu" for a QEMU executable, else its exe basename, else its comm; None if gone."""
    comm = (_read(proc / str(pid) / "comm") or "").rstrip("\n")
    if comm in VSWITCH_PROCESSES:
        return comm
    for name in VSWITCH_PROCESSES:     # a longer name the kernel cut to COMM_LEN
        if len(comm) == COMM_LEN and name.startswith(comm):
            return name
    exe = _exe(proc, pid)
    if exe in QEMU_PROCESSES:       # a VM given by pid (a libvirt pidfile): component qemu
        return QEMU
    return exe or comm or None


def qualified(name: str, stem: str | None) -> str:
    """A process name told apart by its pidfile's stem when the stem extends it: the
    two ovsdb-servers of an OVN central (``ovsdb-server-nb.pid``, ``ovsdb-server-sb.pid``)
    are components ``ovsdb-server-nb`` and ``ovsdb-server-sb``; ``ovs-vswitchd.pid``
    or an unrelated stem leave the name as it is (its part still follows the name)."""
    return stem if stem and stem.startswith(f"{name}-") else name


def find_processes(proc: Path, names: Iterable[str] = VSWITCH_PROCESSES,
                   extra_pids: Iterable[int] = (), entries: list[ThreadCpu] | None = None
                   ) -> dict[int, str]:
    """pid -> process name of every process named exactly as one of ``names``
    (from ``entries``, a ``scan``, when given), plus ``extra_pids`` if they exist,
    named after their exe/comm; a {pid: pidfile stem} mapping qualifies those names
    (``qualified``)."""
    names = tuple(names)
    out = {}
    if names:
        for t in scan(proc) if entries is None else entries:
            name = match_name(proc, t.tid, t.comm, names)
            if name:
                out[t.tid] = name
    named = extra_pids if isinstance(extra_pids, dict) else dict.fromkeys(extra_pids)
    for pid, stem in named.items():
        if pid not in out and (proc / str(pid)).is_dir():
            out[pid] = qualified(process_name(proc, pid) or str(pid), stem)
    return out


def kernel_threads(entries: Iterable[ThreadCpu]) -> list[ThreadCpu]:
    """The kernel threads (children of kthreadd) of a ``scan``: ksoftirqd/N, vhost-PID, ..."""
    return [t for t in entries if t.ppid == KTHREADD]


def ksoftirqd_seconds(threads: Iterable[ThreadCpu]) -> dict[int, float]:
    """CPU -> seconds of ksoftirqd/CPU. The kernel accounts this time to softirq in
    /proc/stat as well, so it is a part of softirq_seconds, never to be added to it."""
    out = {}
    for t in threads:
        m = re.fullmatch(r"ksoftirqd/(\d+)", t.comm)
        if m:
            out[int(m.group(1))] = t.seconds
    return out


def vhost_kthreads(threads: Iterable[ThreadCpu], owners: Iterable[int]) -> dict[int, float]:
    """owner pid -> seconds of the "vhost-OWNER" kernel threads (kernels < 6.4) of
    the given QEMU pids."""
    wanted = set(owners)
    out: dict = {}
    for t in threads:
        m = re.fullmatch(r"vhost-(\d+)", t.comm)
        if m and int(m.group(1)) in wanted:
            owner = int(m.group(1))
            out[owner] = out.get(owner, 0.0) + t.seconds
    return out


def irq_time_accounting(proc: Path, boot: Path = Path("/boot")) -> bool | None:
    """CONFIG_IRQ_TIME_ACCOUNTING from /proc/config.gz, else /boot/config-RELEASE;
    None if unknown. Without it, a tick that lands in softirq while a task runs is
    charged to the task *and* to the CPU's softirq time, and the task's scheduler
    runtime contains the softirq: task CPU and softirq CPU then overlap."""
    import gzip
    try:
        with gzip.open(proc / "config.gz", "rt") as f:
            return any(line.strip() == "CONFIG_IRQ_TIME_ACCOUNTING=y" for line in f)
    except (OSError, EOFError):
        if Path(proc) != Path("/proc"):
            return None                  # a fake or foreign procfs: /boot is not its kernel's
    try:
        text = (boot / f"config-{os.uname().release}").read_text()
    except OSError:
        return None
    return "CONFIG_IRQ_TIME_ACCOUNTING=y" in text.splitlines()


def schedstat_seconds(text: str) -> float:
    """Scheduler runtime from a /proc/PID[/task/TID]/schedstat line ("run_ns wait_ns
    slices"): ns-exact, unlike the tick-sampled utime/stime of stat."""
    return int(text.split()[0]) / 1e9


def thread_runtimes(proc: Path, pid: int, hz: int | None = None) -> list[tuple[ThreadCpu, float]]:
    """(stat, runtime seconds from schedstat) of every live thread of ``pid``."""
    hz = hz or clk_tck()
    try:
        tids = os.listdir(proc / str(pid) / "task")
    except OSError:
        return []
    out = []
    for tid in sorted(tids, key=lambda t: int(t) if t.isdigit() else 0):
        base = f"{proc}/{pid}/task/{tid}"
        text, sched = _read(f"{base}/stat"), _read(f"{base}/schedstat")
        if not text or not sched:
            continue
        try:
            out.append((parse_stat(text, hz), schedstat_seconds(sched)))
        except (ValueError, IndexError):
            continue
    return out


CPU_FIELDS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")


def cpu_times(proc: Path, hz: int | None = None) -> dict[int, dict[str, float]]:
    """Per CPU, the /proc/stat columns (user ... steal) in seconds."""
    hz = hz or clk_tck()
    out = {}
    for line in (_read(proc / "stat") or "").splitlines():
        m = re.match(r"cpu(\d+)\s", line)
        if m:
            values = line.split()[1:1 + len(CPU_FIELDS)]
            out[int(m.group(1))] = {f: int(v) / hz for f, v in zip(CPU_FIELDS, values)}
    return out


def busy_seconds(times: dict[str, float]) -> float:
    """A CPU's time spent running this kernel's work: every column but idle, iowait
    and steal (time the hypervisor gave to someone else)."""
    return sum(v for f, v in times.items() if f not in ("idle", "iowait", "steal"))


def busy_share(a: dict[str, float], b: dict[str, float]) -> float | None:
    """The share (0..1) of a CPU's own time between two ``cpu_times`` rows that was busy:
    busy over busy + idle + iowait, both from /proc/stat, so never above 1 whatever clock
    the caller's window was timed by (steal left out: time that was never this CPU's).
    None when no tick passed."""
    busy = busy_seconds(b) - busy_seconds(a)
    own = busy + sum(b[f] - a[f] for f in ("idle", "iowait"))
    return busy / own if own > 0 else None
