"""Per-test expectations (--expect): the file, the matrix against it, and the run's outcome
through the real pytest plugin (verdicts recorded by stand-in tests: no testbed, no root)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from vnetbench.functional import expect
from vnetbench.functional.matrix import Matrix
from vnetbench.functional.verdict import Status, Verdict

ROOT = Path(__file__).resolve().parents[2]


def write(tmp_path, text, name="expect.yaml"):
    p = tmp_path / name
    p.write_text(text)
    return p


def test_example_loads_and_the_most_specific_rule_wins():
    e = expect.load(ROOT / "examples" / "expect" / "tenant-isolation.yaml")
    assert e.status("ovs", "vxlan", "isolation.broadcast") is Status.PASS          # "*"
    assert e.status("ovs-openflow", "vxlan", "isolation.broadcast") is Status.FAIL  # kind
    assert e.status("ovs", "vxlan", "feature.encapsulation") is Status.PASS         # kind/network
    assert e.status("ovs", "flat", "feature.encapsulation") is None
    assert e.status("ovn", "vxlan", "rate.egress-compliance") is None


@pytest.mark.parametrize("text, where", [
    ("ovs: {isolation.unicast: Pass}\n", "(top level): must be one mapping 'expect:'"),
    ("expect: [ovs]\n", "expect: must map kinds"),
    ("expect: {vmware: {isolation.unicast: Pass}}\n", "expect.vmware: 'vmware' is not a kind"),
    ("expect: {ovs/ipx: {isolation.unicast: Pass}}\n", "expect.ovs/ipx:"),
    ("expect: {ovs: {isolation.nope: Pass}}\n", "expect.ovs: unknown row 'isolation.nope'"),
    ("expect: {ovs: {isolation.unicast: ok}}\n", "expect.ovs.isolation.unicast: 'ok' is not a verdict"),
    ("expect: {ovs: {isolation.unicast: Error}}\n", "use one of: Pass, Fail, Fail-open, Fail-close, N/A"),
    ("expect: {ovs: [\n", "invalid YAML"),
])
def test_bad_file_is_one_line_naming_file_and_field(tmp_path, text, where):
    p = write(tmp_path, text)
    with pytest.raises(expect.ExpectFileError) as err:
        expect.load(p)
    msg = str(err.value)
    assert msg.startswith(f"{p}: ") and where in msg and "\n" not in msg, msg


def test_cli_refuses_a_bad_file_before_running(tmp_path):
    p = write(tmp_path, "expect: {ovs: {isolation.unicast: ok}}\n")
    done = subprocess.run([sys.executable, "-m", "vnetbench", "functional", "--expect", str(p),
                           "--out", str(tmp_path / "out")], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert "is not a verdict" in done.stderr and not (tmp_path / "out").exists()


def test_matrix_marks_and_counts_unmet_user_expectations(tmp_path):
    e = expect.load(write(tmp_path, "expect: {ovs: {isolation.broadcast: Pass, isolation.unicast: Pass}}\n"))
    m = Matrix(expect={}, user=e)
    m.add("ovs", "vxlan", "isolation.broadcast", Verdict(Status.FAIL, 600, "frames", "leak"))
    m.add("ovs", "vxlan", "isolation.unicast", Verdict(Status.PASS, 0, "frames"))
    assert m.unmet() == [("ovs", "vxlan", "isolation.broadcast", Status.FAIL, Status.PASS)]
    md = m.markdown()
    assert "Fail 600 frames (expected Pass) [1]" in md
    assert "1 of 2 cells met, not met:" in md and "ovs/vxlan, isolation.broadcast: measured Fail" in md
    back = Matrix.from_dict(json.loads(json.dumps(m.to_dict())))
    assert back.unmet() == m.unmet() and back.markdown() == md


STAND_IN = '''
import pytest
from vnetbench.functional.verdict import Status, Verdict

@pytest.mark.row("isolation.broadcast")
def test_leak(combo, record):
    record(Verdict(Status.FAIL, 600, "frames", "captured in the other vnet"))

@pytest.mark.row("isolation.deprovision")
def test_not_applicable(combo, record):
    pytest.skip("not implemented for this kind")

@pytest.mark.quick_one_kind
@pytest.mark.row("rate.egress-compliance")
def test_full_only(combo, record):
    record(Verdict(Status.PASS, 9.7, "Mbit/s"))
'''


RULES = """expect:
  linuxbridge: {isolation.broadcast: Fail}        # an expected finding: met, even with --strict
  ovn: {isolation.broadcast: Pass}                # unmet: fails without --strict
  ovs-openflow/vxlan: {isolation.deprovision: Pass}   # an N/A nobody expected: fails
  ovs-openflow/flat: {isolation.broadcast: Pass}  # another network: no rule here
"""


@pytest.mark.parametrize("strict, failed", [
    (False, ["test_leak[ovn-vxlan]", "test_not_applicable[ovs-openflow-vxlan]"]),
    (True, ["test_leak[ovn-vxlan]", "test_leak[ovs-openflow-vxlan]", "test_leak[ovs-vxlan]",
            "test_not_applicable[ovs-openflow-vxlan]"]),
])
def test_the_run_fails_exactly_on_unmet_expectations(tmp_path, strict, failed):
    """One kind per case in one run: ovs has no rule (a finding, failing only with --strict).
    The strict run is also --quick: the ``quick_one_kind`` row runs on linuxbridge only."""
    (tmp_path / "test_standin.py").write_text(STAND_IN)
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "vnetbench.functional.plugin",
            str(tmp_path / "test_standin.py"), "--network=vxlan", f"--matrix-out={tmp_path / 'm'}",
            "-p", "no:cacheprovider", "-rfs", f"--expect={write(tmp_path, RULES)}",
            *(f"--vswitch={k}" for k in ("linuxbridge", "ovs", "ovs-openflow", "ovn"))]
    if strict:
        argv += ["--strict-verdicts", "--quick"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 1, done.stdout[-2000:]
    got = sorted(line.split("::")[1].split(" ")[0] for line in done.stdout.splitlines()
                 if line.startswith("FAILED"))
    assert got == failed, done.stdout[-2000:]
    cells = json.loads((tmp_path / "m" / "matrix.json").read_text())["cells"]
    one_kind = sorted(c["vswitch"] for c in cells if c["row"] == "rate.egress-compliance")
    assert one_kind == (["linuxbridge"] if strict else ["linuxbridge", "ovn", "ovs", "ovs-openflow"])
    cells = [c for c in cells if c["row"] != "rate.egress-compliance"]
    assert len(cells) == 8 and {c["status"] for c in cells} == {"Fail", "N/A"}
    assert "1 of 3 cells met, not met:" in (tmp_path / "m" / "matrix.md").read_text()
