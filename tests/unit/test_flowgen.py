"""The flow-setup-rate executor against recorded vnetbench-flowgen output.

The files in tests/data/flowgen were recorded with tools/flowgen between two network
namespaces joined by a veth pair (client 198.18.98.1 and .11 on CPU 0, server
198.18.98.2 listening on 5000-5255 on CPU 1): rate10 / rate10k are clean runs,
refused dials a closed port (6000) from two sources with a 16-byte write,
stalled-server ran against one port while the server was stopped (SIGSTOP) for 1.6 s
(accept queue full: SYNs dropped, retransmitted after 1 s -> late, or timed out),
text.txt is the human-readable output, server.txt the server's output up to SIGTERM.
"""

from pathlib import Path

import pytest

from vnetbench.errors import PrerequisiteError
from vnetbench.traffic import flowgen

DATA = Path(__file__).resolve().parents[1] / "data" / "flowgen"
EXE = "/opt/bin/vnetbench-flowgen"


def read(name):
    return (DATA / name).read_text()


def test_server_command_listens_on_all_ports():
    argv = flowgen.server_command(flowgen.ServerParams(listen="198.18.98.2", ports="5000-5063"), EXE)
    assert argv == [EXE, "server", "-listen", "198.18.98.2:5000-5063"]


def test_client_command_defaults():
    argv = flowgen.client_command(flowgen.ClientParams(target="198.18.98.2", rate=20000), EXE)
    assert argv == [EXE, "client", "-target", "198.18.98.2", "-ports", "5000-5255",
                    "-rate", "20000", "-duration", "10", "-deadline", "1000", "-timeout", "3000",
                    "-max-lag", "10", "-json"]


def test_client_command_sources_write_and_fractions():
    p = flowgen.ClientParams(target="198.18.98.2", rate=12.5, duration_s=1.5, ports="5000,5002",
                             deadline_ms=200, timeout_ms=1500, sources=("198.18.98.1", "198.18.98.11"),
                             write_bytes=16)
    argv = flowgen.client_command(p, EXE)
    assert argv[argv.index("-rate") + 1] == "12.5"
    assert argv[argv.index("-duration") + 1] == "1.5"
    assert argv[-5:] == ["-sources", "198.18.98.1,198.18.98.11", "-write", "16", "-json"]


@pytest.mark.parametrize("kwargs", [{"rate": 0}, {"rate": 10, "ports": "5000-"},
                                    {"rate": 10, "deadline_ms": 5000, "timeout_ms": 3000}])
def test_client_params_reject_nonsense(kwargs):
    with pytest.raises(ValueError):
        flowgen.ClientParams(target="198.18.98.2", **kwargs)


def test_binary_next_to_python_first(tmp_path, monkeypatch):
    exe = tmp_path / "vnetbench-flowgen"
    exe.write_text("#!/bin/sh\n")
    exe.chmod(0o755)
    monkeypatch.setattr(flowgen.sys, "executable", str(tmp_path / "python"))
    monkeypatch.setenv("PATH", "/nonexistent")
    assert flowgen.binary() == str(exe)
    assert flowgen.client_command(flowgen.ClientParams(target="198.18.98.2", rate=10))[0] == str(exe)


def test_binary_on_path(tmp_path, monkeypatch):
    (tmp_path / "bin").mkdir()
    exe = tmp_path / "bin" / "vnetbench-flowgen"
    exe.write_text("#!/bin/sh\n")
    exe.chmod(0o755)
    monkeypatch.setattr(flowgen.sys, "executable", str(tmp_path / "python"))
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    assert flowgen.binary() == str(exe)


def test_binary_missing_says_how_to_build(tmp_path, monkeypatch):
    monkeypatch.setattr(flowgen.sys, "executable", str(tmp_path / "python"))
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(PrerequisiteError, match="build it with 'make flowgen'") as exc:
        flowgen.server_command(flowgen.ServerParams(listen="198.18.98.2"))
    assert "\n" not in str(exc.value)


def test_parse_clean_run():
    res = flowgen.parse(read("rate10k.json"))
    assert (res["rate_target"], res["attempted"], res["ok"], res["failed"], res["late"]) == \
        (10000, 30000, 30000, 0, 0)
    assert (res["loss_pct"], res["lost"], res["errors"]) == (0, 0, {})
    assert res["achieved_rate"] == pytest.approx(10000, rel=0.01)
    lat = res["latency_us"]
    assert lat["p50"] <= lat["p90"] <= lat["p99"] <= lat["p999"] <= lat["max"]
    assert res["schedule_kept"] is True and res["unique_tuples"] == 30000
    assert res["process_cpu_s"] > 0 and res["runqueue_wait_s"] >= 0


def test_parse_low_rate():
    res = flowgen.parse(read("rate10.json"))
    assert (res["attempted"], res["ok"], res["achieved_rate"], res["max_inflight"]) == (20, 20, 10, 1)


def test_parse_refused_port():
    res = flowgen.parse(read("refused.json"))
    assert (res["attempted"], res["ok"], res["failed"], res["errors"]) == (300, 200, 100, {"refused": 100})
    assert res["loss_pct"] == pytest.approx(100 / 3, abs=1e-3)
    assert (res["sources"], res["write_bytes"]) == ("198.18.98.1,198.18.98.11", 16)


def test_parse_stalled_server_late_and_timeouts():
    res = flowgen.parse(read("stalled-server.json"))
    assert res["ok"] + res["failed"] + res["late"] == res["attempted"] == 15000
    assert res["late"] > 0 and set(res["errors"]) == {"timeout"}
    assert res["lost"] == res["failed"] + res["late"]
    assert res["loss_pct"] == pytest.approx(100 * res["lost"] / res["attempted"], abs=1e-3)
    assert res["latency_us"]["p99"] > 1_000_000         # a SYN retransmission (1 s)
    assert res["max_inflight"] > 4096                      # more than one accept queue
    assert res["unique_tuples"] < res["ok"] + res["late"]  # one port: the kernel reuses source ports


def test_parse_rejects_other_output():
    for text in (read("text.txt"), read("server.txt"), "", "{not json\n"):
        with pytest.raises(ValueError, match="not vnetbench-flowgen client output"):
            flowgen.parse(text)


def test_parse_server_counters():
    res = flowgen.parse_server(read("server.txt"))
    assert res["accepted"] == res["reset_by_peer"] == 44431
    assert (res["closed_by_peer"], res["open_at_stop"], res["bytes"]) == (0, 0, 3200)
    with pytest.raises(ValueError, match="server output"):
        flowgen.parse_server(read("server.txt").splitlines()[0])


def test_recorded_files_are_single_json_lines():
    for path in DATA.glob("*.json"):
        assert len(path.read_text().strip().splitlines()) == 1, path.name
