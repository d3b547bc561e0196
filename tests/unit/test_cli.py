"""The CLI turns user errors into one line on stderr and exit status 2."""

from pathlib import Path

import pytest

from vnetbench import cli
from vnetbench.testbed.netns.names import Names

BAD = Path(__file__).resolve().parents[1] / "data" / "bad"


@pytest.mark.parametrize("action", ["up", "validate"])
def test_bad_file_is_one_line_exit_2(action, capsys):
    bad = next(BAD.glob("*.yaml"))
    assert cli.main(["testbed", action, str(bad)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"vnetbench: error: {bad}:") and "\n" not in err


def test_missing_file(tmp_path, capsys):
    assert cli.main(["testbed", "validate", str(tmp_path / "nope.yaml")]) == 2
    assert "cannot read file" in capsys.readouterr().err


def test_down_without_runs(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("VNETBENCH_STATE_DIR", str(tmp_path))
    assert cli.main(["testbed", "down"]) == 2
    assert "no testbed is up" in capsys.readouterr().err


def test_validate_examples(capsys):
    ex = Path(__file__).resolve().parents[2] / "examples" / "ovs-vxlan.yaml"
    assert cli.main(["testbed", "validate", str(ex)]) == 0
    assert "tenant MTU 1450" in capsys.readouterr().out


def test_interface_names_fit_ifnamsiz():
    n = Names("abcdef")
    for name in (n.vm_port(999, 9), n.fabric_physnet(99, 99), n.tunnel_port(99, 99),
                 n.uplink, n.fabric_uplink(999), n.lb_bridge(999), n.ovs_phy):
        assert len(name) <= 15 and "abcdef" in name
    with pytest.raises(ValueError):
        n.vm_port(99999, 99)


def test_help_describes_the_tool(capsys):
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    out = capsys.readouterr().out
    assert "virtual networks of\nOpenStack/KVM clouds" in out and "vnetbench compare" in out
    assert "Command line:" not in out                     # not the module's docstring


def test_validate_counts_in_words(tmp_path, capsys):
    f = tmp_path / "one.yaml"
    f.write_text("vswitch: ovs\nnetwork: {type: vxlan}\nhosts: [{name: h1}]\n"
                 "vms: [{name: a, host: h1}, {name: b, host: h1}]\n")
    assert cli.main(["testbed", "validate", str(f)]) == 0
    out = capsys.readouterr().out
    assert "1 host, 1 vnet, 2 VMs" in out, out
