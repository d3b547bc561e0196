"""What a run may have left behind, found by looking (never used to delete anything)."""

import os
import sys
from pathlib import Path

import pytest
from pyroute2 import netns


def namespaces_of(run_id: str) -> list[str]:
    return [n for n in netns.listnetns() if n.startswith(f"vnb-{run_id}-")]


def processes_mentioning(text: str) -> list[str]:
    return [f"{pid}: {cmd[:120]}" for pid, _, cmd in _processes()
            if pid != str(os.getpid()) and text in cmd]


def decoys_touched(decoys) -> list[str]:
    """What cleanup did to the ``decoys`` fixture's namespace and bridges (should be nothing)."""
    from pyroute2 import IPRoute, NetNS
    ns_name, br_name = decoys
    if ns_name not in netns.listnetns():
        return ["cleanup removed a namespace it did not create"]
    touched = []
    with NetNS(ns_name, flags=0) as ns:
        if not ns.link_lookup(ifname=br_name):
            touched.append("cleanup touched a bridge inside a foreign namespace")
    with IPRoute() as ipr:
        if not ipr.link_lookup(ifname=br_name):
            touched.append("cleanup removed a root-namespace bridge it did not create")
    return touched


def leftovers(run_id: str, run_dir: Path) -> dict:
    left = {"namespaces": namespaces_of(run_id),
            "processes": processes_mentioning(str(run_dir)),
            "state": [str(run_dir)] if run_dir.exists() else []}
    return {k: v for k, v in left.items() if v}


# --- the module guard (conftest): what each test module leaves, compared with before it ---

QEMU_EXE = "qemu-system"


def _processes() -> list[tuple[str, str, str]]:
    """(pid, executable's name or "", command line) of every process that has a command line."""
    out = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            cmd = Path(entry.path, "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        try:
            exe = os.path.basename(os.readlink(Path(entry.path, "exe")))
        except OSError:         # gone meanwhile, or exiting: its command line still counts
            exe = ""
        if cmd:
            out.append((entry.name, exe, cmd.strip()))
    return out


def _root_links() -> set[str]:
    from pyroute2 import IPRoute
    with IPRoute() as ipr:
        return {link.get_attr("IFLA_IFNAME") for link in ipr.get_links()}


def _domains() -> set[str]:
    """Libvirt domains of the system libvirtd, when one is running (read-only, no error
    output: a stale socket or no daemon is simply 'none')."""
    if not Path("/run/libvirt/libvirt-sock-ro").exists():
        return set()
    try:
        import libvirt
        libvirt.registerErrorHandler(lambda *_: None, None)
        conn = libvirt.openReadOnly("qemu:///system")
    except Exception:
        return set()
    try:
        return {d.name() for d in conn.listAllDomains()}
    except Exception:
        return set()
    finally:
        conn.close()


def suite_objects(markers: tuple[str, ...]) -> dict[str, set[str]]:
    """What a test module may create and must remove: network namespaces, links in the
    root namespace (taps, veths, bridges), QEMU processes, libvirt domains, and processes
    whose command line names one of MARKERS (the session's temp tree, the default state
    root): daemons a testbed started from its run directory."""
    procs = _processes()
    return {
        "namespaces": set(netns.listnetns()),
        "root-namespace links": _root_links(),
        "QEMU processes": {f"{pid}: {cmd[:150]}" for pid, exe, cmd in procs if exe.startswith(QEMU_EXE)},
        "libvirt domains": _domains(),
        "processes": {f"{pid}: {cmd[:150]}" for pid, exe, cmd in procs
                      if pid != str(os.getpid()) and any(m in cmd for m in markers)},
    }


def added(before: dict[str, set[str]], after: dict[str, set[str]]) -> dict[str, list[str]]:
    return {k: sorted(after[k] - before.get(k, set())) for k in after if after[k] - before.get(k, set())}


def merge(into: dict[str, set[str]], more: dict[str, list[str]]) -> None:
    for k, v in more.items():
        into.setdefault(k, set()).update(v)


class ModuleGuard:
    """The integration suite's module guard (registered by its conftest): a snapshot of
    suite_objects before each module of DIRECTORY, what session- or package-scoped
    fixtures make during it attributed to them, and the module's last teardown failing
    on anything it added that is still there; at the session's end, once every fixture
    is gone, everything compared with the very start.

    In one of the test command's lanes (LANE, lanes.py) another session runs beside this
    one: then a namespace or root-namespace link counts only when its name carries the id
    of a run this session made (``lanes.owned_run_ids``, looked for after every test's
    setup and call, so a run torn down later still counts), QEMU processes and libvirt
    domains only in the guests lane (the netns lane makes none), processes by this
    session's temp tree or one of its runs' ids."""

    def __init__(self, directory: Path, lane: str | None = None):
        self.directory = Path(directory)
        self.lane = lane
        self.session = self.before = None
        self.module = None
        self.owned: dict[str, set[str]] = {}
        self.run_ids: set[str] = set()
        self.base: str | None = None

    def _ours(self, item) -> bool:
        return self.directory in Path(item.path).parents

    def _markers(self, config) -> tuple[str, ...]:
        base = self.base = str(config._tmp_path_factory.getbasetemp())
        if self.lane is None:
            return (base, "/run/vnetbench/")
        return (base, f"{(os.environ.get('VNETBENCH_STATE_DIR') or '/run/vnetbench').rstrip('/')}/")

    def _look_for_runs(self, config) -> None:
        if self.lane is not None:
            import lanes
            self.run_ids |= lanes.owned_run_ids(self._markers(config))

    def _mine(self, objects: dict[str, set[str]]) -> dict[str, set[str]]:
        """OBJECTS (suite_objects) narrowed to this session's in a lane; all of them else."""
        if self.lane is None:
            return objects
        ids = self.run_ids
        out = {}
        for k, v in objects.items():
            if k in ("namespaces", "root-namespace links"):
                v = {name for name in v if any(rid in name for rid in ids)}
            elif k == "processes":      # the default state root may be another suite's too
                v = {p for p in v if (self.base and self.base in p) or any(rid in p for rid in ids)}
            elif k in ("QEMU processes", "libvirt domains") and self.lane != "guests":
                v = set()
            out[k] = set(v)
        return out

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_setup(self, item):
        module = item.nodeid.split("::")[0]
        if self._ours(item) and self.module != module:
            now = suite_objects(self._markers(item.config))
            if self.session is None:
                self.session = {k: set(v) for k, v in now.items()}
            self.module, self.before = module, now
            merge(self.before, {k: list(v) for k, v in self.owned.items()})
        try:
            return (yield)
        finally:
            self._look_for_runs(item.config)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item):
        try:
            return (yield)
        finally:
            self._look_for_runs(item.config)

    @pytest.hookimpl(wrapper=True)
    def pytest_fixture_setup(self, fixturedef, request):
        if self.before is None or fixturedef.scope not in ("session", "package"):
            return (yield)
        markers = self._markers(request.config)
        before = suite_objects(markers)
        try:
            return (yield)
        finally:
            made = added(before, suite_objects(markers))
            merge(self.owned, made)
            merge(self.before, made)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_teardown(self, item, nextitem):
        failed = None
        try:
            result = yield
        except BaseException as exc:
            failed = exc
        last = nextitem is None         # session fixtures are gone too: compare with the start
        module = item.nodeid.split("::")[0]
        ends = self.module == module and (last or nextitem.nodeid.split("::")[0] != module)
        message = None
        if self.session is not None and (ends or last):
            left = left_since(self.session if last else self.before, self._markers(item.config),
                              mine=self._mine)
            self.module = None
            if left:
                what = "; ".join(f"{k}: {', '.join(v[:8])}" for k, v in left.items())
                message = (f"{'the session' if last else module} left {what} "
                           f"(the module guard of tests/integration/conftest.py)")
        if failed is not None:
            if message:
                print(message, file=sys.stderr)
            raise failed
        if message:
            raise AssertionError(message)
        return result


def left_since(before: dict[str, set[str]], markers: tuple[str, ...],
               grace_s: float = float(os.environ.get("VNETBENCH_LEAK_GRACE_S", "15")),
               mine=lambda objects: objects) -> dict:
    """What exists now and did not BEFORE, of what MINE keeps (a lane's own); a few
    seconds' grace for what is going (a killed QEMU not yet reaped, a port a daemon is
    unplugging), so that only what stays is named."""
    import time
    deadline = time.monotonic() + grace_s
    while True:
        left = added(mine(before), mine(suite_objects(markers)))
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.5)
