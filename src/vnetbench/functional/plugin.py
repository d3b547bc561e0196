"""pytest plugin of the functional matrix (``-p vnetbench.functional.plugin``).

Tests ask for ``combo`` (vSwitch kind, network type; one module-scoped parameter
per configuration), build their testbed with ``deployment()``, and report a
verdict with ``record``. Every test carries ``@pytest.mark.row(id)``: a skip
becomes an N/A cell with its reason, an exception an Error cell, so nothing that
did not pass can vanish from the matrix. A Fail of the system under test is a
finding: it fails the test only with ``--strict``.
"""

from __future__ import annotations

import os
import time
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace

import pytest

from vnetbench import kinds, machinelock
from vnetbench.errors import UnsupportedError, VnetbenchError
from vnetbench.functional.matrix import Matrix
from vnetbench.functional.verdict import FAILURES, Status, error, na
from vnetbench.testbed import capabilities, options
from vnetbench.testbed.loader import loads
from vnetbench.testbed.model import NetType, VSwitchKind

MATRIX = pytest.StashKey[Matrix]()
TARGET = pytest.StashKey[tuple]()
WRITTEN = pytest.StashKey[list]()
RECORDED = pytest.StashKey[bool]()


def pytest_addoption(parser):
    g = parser.getgroup("vnetbench", "vnetbench functional matrix")
    g.addoption("--vswitch", action="append", choices=[k.value for k in VSwitchKind],
                help="vSwitch kinds to test (repeatable; default: every kind)")
    g.addoption("--network", action="append", choices=[t.value for t in NetType],
                help="network types to test (repeatable; default: every type)")
    g.addoption("--strict-verdicts", action="store_true",
                help="a Fail of the system under test fails the run (default: recorded only)")
    g.addoption("--quick", action="store_true",
                help="every row on one network type per kind (vxlan where selected): the "
                     "subset make test runs")
    g.addoption("--every-network", action="store_true",
                help="run the per-kind modules (faults, migration) on every network type too "
                     "(default: one per kind, vxlan where selected)")
    g.addoption("--expect", default=None, metavar="FILE",
                help="YAML of expected verdicts per kind (or kind/network) and row: a cell that "
                     "differs fails its test and the run (vnetbench.functional.expect)")
    g.addoption("--matrix-out", default=None,
                help="directory for matrix.json and matrix.md (default: results/functional-<time>)")
    options.add_arguments(g.addoption)


def pytest_configure(config):
    config.addinivalue_line("markers", "row(id): the functional matrix row a test measures")
    config.addinivalue_line("markers", "per_kind: measured on one network type per kind (vxlan "
                            "where selected) unless --every-network")
    config.addinivalue_line("markers", "whole_machine: its verdict rests on a rate or a pause: "
                            "with VNETBENCH_MACHINE_LOCK set it waits for the machine to itself "
                            "(vnetbench.machinelock); every other row holds a share")
    config.addinivalue_line("markers", "quick_one_kind: with --quick, measured on one kind only "
                            "(the first selected, linuxbridge by default)")
    user = None
    if config.getoption("expect"):
        from vnetbench.functional import expect
        try:
            user = expect.load(config.getoption("expect"))
        except VnetbenchError as exc:
            raise pytest.UsageError(str(exc)) from None
    try:
        config.stash[TARGET] = deployment_target(config)
    except VnetbenchError as exc:
        raise pytest.UsageError(str(exc)) from None
    config.stash[MATRIX] = Matrix(user=user, backend=config.getoption("backend"))


def deployment_target(config) -> tuple[str, dict]:
    """(backend, build keywords) of the deployment every testbed is built on: the embedded
    testbed by default, a libvirt hypervisor or an OpenStack cloud when one is configured."""
    ns = SimpleNamespace(**{options.dest(f): config.getoption(options.dest(f))
                            for f, _ in options.ARGUMENTS})
    return ns.backend, options.build_options(ns, command="functional")


def combos(config) -> list[tuple[VSwitchKind, NetType]]:
    chosen = [VSwitchKind(k) for k in config.getoption("vswitch") or []] or list(VSwitchKind)
    types = [NetType(t) for t in config.getoption("network") or []] or list(NetType)
    return [(k, t) for k in chosen for t in types]


def one_network_per_kind(cs):
    """Per kind, its preferred type (``Kind.preferred_network``: vxlan, or what the kind
    carries) when selected, else its first."""
    picked = {}
    for k, t in cs:
        if k not in picked or t is kinds.get(k).preferred_network:
            picked[k] = t
    return [(k, t) for k, t in cs if picked[k] is t]


def pytest_collection_modifyitems(config, items):
    """--quick runs the ``quick_one_kind`` rows on the first selected kind only: every row
    is still measured on at least one kind (the others show — in those rows). A
    ``per_kind`` row in a per-network module runs on one network type per kind, as the
    PER_KIND modules do, unless --every-network."""
    out = []
    if not config.getoption("every_network"):
        keep = set(one_network_per_kind(combos(config)))
        out += [i for i in items if i.get_closest_marker("per_kind") and _combo(i) not in keep]
    if config.getoption("quick"):
        first = combos(config)[0][0]
        out += [i for i in items
                if i.get_closest_marker("quick_one_kind") and _combo(i)[0] is not first]
    if out:
        config.hook.pytest_deselected(items=out)
        items[:] = [i for i in items if i not in out]


def pytest_generate_tests(metafunc):
    if "combo" in metafunc.fixturenames:
        cs = combos(metafunc.config)
        quick = metafunc.config.getoption("quick")
        per_kind = getattr(metafunc.module, "PER_KIND", False)
        if quick or (per_kind and not metafunc.config.getoption("every_network")):
            cs = one_network_per_kind(cs)
        metafunc.parametrize("combo", cs, ids=[f"{k.value}-{t.value}" for k, t in cs],
                             scope="module")


@pytest.fixture(scope="session")
def caps():
    return capabilities.probe()


@pytest.fixture(scope="session")
def target(request) -> tuple[str, dict]:
    return request.config.stash[TARGET]


@pytest.fixture(scope="session")
def matrix(request) -> Matrix:
    return request.config.stash[MATRIX]


class NotBuilt(pytest.skip.Exception):
    """This machine cannot build the configuration: its cells are N/A, its column hidden."""


# backends whose hosts and vSwitches are the embedded testbed's (this machine's kernel)
EMULATED_HOSTS = ("netns", "libvirt")


@contextmanager
def deployment(combo, caps, text: str, name: str, target=("netns", {})):
    """Build ``text`` (a testbed with {kind} and {ntype} fields) for ``combo`` on
    ``target`` (backend, build keywords); skip (an N/A cell) when it cannot be built
    there; tear it down after."""
    from vnetbench.testbed import deployment as backends
    kind, ntype = combo
    backend, opts = target
    if backend in EMULATED_HOSTS:
        if not caps.root:
            raise NotBuilt("needs root (CAP_NET_ADMIN, CAP_SYS_ADMIN) to build the embedded testbed")
        reason = caps.why_not(kind, ntype)
        if reason:
            raise NotBuilt(reason)
        opts = {**opts, "caps": caps}
    tb = loads(text.format(kind=kind.value, ntype=ntype.value),
               source=f"<{name} {kind.value}-{ntype.value}>", online_cpus=sorted(os.sched_getaffinity(0)))
    try:
        dep = backends.build(backend, tb, **opts)
    except UnsupportedError as exc:       # e.g. a kind that cannot realise a declared qos
        raise NotBuilt(str(exc)) from None
    except VnetbenchError as exc:         # a cloud that cannot realise this testbed's shape
        if backend in EMULATED_HOSTS:
            raise
        raise NotBuilt(f"{backend}: {exc}") from None
    try:
        yield dep
    finally:
        errors = dep.down()
        if errors:
            raise RuntimeError(f"teardown of run {dep.run_id} failed: {errors[0]}")


def one_vnet(vms: int) -> str:
    """A testbed template (``deployment``) of one vnet, red, with VMs red-1 .. red-N
    alternating between h1 and h2 (odd on h1)."""
    lines = [f"  - {{{{name: red-{i}, host: h{2 - i % 2}}}}}" for i in range(1, vms + 1)]
    return ("vswitch: {kind}\nnetwork: {{type: {ntype}}}\n"
            "vnets: [{{name: red, cidr: 198.19.1.0/24}}]\nvms:\n" + "\n".join(lines) + "\n")


def deployment_fixture(text: str, name: str):
    """A module-scoped ``dep`` fixture: ``text`` built for each combo (``deployment``)."""
    @pytest.fixture(scope="module")
    def dep(combo, caps, target):
        with deployment(combo, caps, text, name, target) as d:
            yield d
    return dep


def _row(item) -> str | None:
    mark = item.get_closest_marker("row")
    return mark.args[0] if mark else None


def _combo(item):
    callspec = getattr(item, "callspec", None)
    return callspec.params.get("combo") if callspec else None


@pytest.fixture
def record(request, matrix):
    """``record(verdict, measurement)``: one cell of the matrix for this test's row."""
    row, combo = _row(request.node), _combo(request.node)
    if row is None or combo is None:
        raise RuntimeError(f"{request.node.nodeid}: needs @pytest.mark.row(id) and the combo fixture")
    kind, ntype = combo

    def rec(verdict, measurement=None):
        matrix.add(kind.value, ntype.value, row, verdict, measurement)
        request.node.stash[RECORDED] = True
        unmet = _unmet(matrix, kind.value, ntype.value, row, verdict)
        if unmet:
            pytest.fail(unmet, pytrace=False)
        if verdict.status is not Status.ERROR and matrix.user and \
                matrix.user.status(kind.value, ntype.value, row) is not None:
            return                          # the user expected this very verdict
        if verdict.status in FAILURES and request.config.getoption("strict_verdicts"):
            pytest.fail(f"{row} on {kind}/{ntype}: {verdict.status}: {verdict.detail}",
                        pytrace=False)
        if verdict.status is Status.ERROR:
            pytest.fail(f"{row} on {kind}/{ntype}: could not measure: {verdict.detail}",
                        pytrace=False)
    return rec


def _unmet(matrix, kind, network, row, verdict) -> str | None:
    """The failure message when the user expected another verdict for this cell."""
    exp = matrix.user.status(kind, network, row) if matrix.user else None
    if exp is None or exp is verdict.status:
        return None
    return (f"{row} on {kind}/{network}: measured {verdict.status}, expected {exp} "
            f"({matrix.user.source}): {verdict.detail}")


def _whole_machine(item) -> bool:
    return item.get_closest_marker("whole_machine") is not None


def _turn_unit(item):
    """A whole-machine row is a turn of its own; the other rows of one testbed share one
    (its daemons run between them: a PMD thread polls its AF_XDP ports even when idle)."""
    return ("row", item.nodeid) if _whole_machine(item) else ("testbed", str(item.path), _combo(item))


TURNS = machinelock.Turns(_turn_unit, _whole_machine)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """A row whose verdict is a rate or a pause measures with the machine to itself when
    other sessions share it (vnetbench.machinelock; a no-op without the lock file)."""
    TURNS.enter(item, item.session.items)
    try:
        yield
    finally:
        TURNS.leave(nextitem)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """A skipped or crashed row test still leaves its cell: N/A or Error with the reason."""
    outcome = yield
    rep = outcome.get_result()
    row, combo = _row(item), _combo(item)
    if row is None or combo is None or item.stash.get(RECORDED, False):
        return
    if rep.failed and call.excinfo and call.excinfo.errisinstance(UnsupportedError):
        # the deployment cannot do what the row needs (a host-side capture on a cloud's
        # compute node, a fault, a migration): N/A with the backend's reason
        rep.outcome, rep.longrepr = "skipped", (str(item.path), 0, f"Skipped: {call.excinfo.value}")
    if rep.skipped:
        reason = rep.longrepr[2] if isinstance(rep.longrepr, tuple) else str(rep.longrepr)
        built = not (call.excinfo and call.excinfo.errisinstance(NotBuilt))
        if not built:
            reason = call.excinfo.value.msg
        verdict = na(reason.removeprefix("Skipped: "), built=built)
    elif rep.failed:
        exc = call.excinfo.value if call.excinfo else None
        text = (str(exc).strip().splitlines() or [type(exc).__name__])[0] if exc else rep.when
        verdict = error(f"{type(exc).__name__ if exc else 'failure'} in {rep.when}: {text}")
    else:
        return
    m = item.config.stash[MATRIX]
    m.add(combo[0].value, combo[1].value, row, verdict)
    item.stash[RECORDED] = True
    unmet = _unmet(m, combo[0].value, combo[1].value, row, verdict)
    if unmet and rep.skipped:            # an N/A the user did not expect fails the run
        rep.outcome, rep.longrepr = "failed", unmet


def pytest_sessionfinish(session):
    m = session.config.stash[MATRIX]
    if not m.cells:
        return
    out = session.config.getoption("matrix_out") or f"results/functional-{time.strftime('%Y%m%d-%H%M%S')}"
    session.config.stash[WRITTEN] = m.write(Path(out))


def pytest_terminal_summary(terminalreporter, config):
    m = config.stash[MATRIX]
    if not m.cells:
        return
    tr = terminalreporter
    tr.section("vnetbench functional matrix")
    tr.write(m.markdown())
    for path in config.stash.get(WRITTEN, []):
        tr.write_line(f"written: {path}")
