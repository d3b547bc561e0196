"""vnetbench report: the one table model and its text, Markdown, CSV and HTML forms,
several runs side by side, N/A cells, bad input. No root needed."""

import csv
import io
import json
import shutil
from pathlib import Path

import pytest

from vnetbench import cli, compare
from vnetbench.errors import VnetbenchError
from vnetbench.report import charts, html, table, text, write
from vnetbench.results import load
from vnetbench.results.record import Result

DATA = Path(__file__).resolve().parents[1] / "data" / "report"
NA_VLAN = "kernel lacks 802.1q VLAN devices (CONFIG_VLAN_8021Q): Operation not supported"


def rec(test, vswitch="ovs", network="vxlan", placement="same-host", point=None, params=None,
        **samples):
    labels = {"test": test, "vswitch": vswitch, "network": network, "placement": placement,
              "params": params or {}}
    labels.update({"point": point} if point else {})
    return Result(test, labels, samples, provenance={"kernel": "6.1", "tenant_mtu": 1450},
                  started=1.0, finished=2.0)


def na(test, vswitch="linuxbridge", network="vlan", reason="no 802.1q"):
    return Result(test, {"test": test, "vswitch": vswitch, "network": network, "placement": "-"},
                  {}, extra={"not_applicable": reason})


def run(records, name="r"):
    return load.Run(name, None, tuple(records))


SMALL = [rec("tcp_stream", point="mss 1468", params={"nominal": 1468, "used": 1410},
             gbps=[1.0, 1.1, 0.96], cpu_pct=[80, 90, 88]),
         rec("tcp_stream", placement="cross-host", point="mss 1468",
             params={"nominal": 1468, "used": 1468}, gbps=[2.0, 2.0], cpu_pct=[150, 150]),
         rec("icmp_rtt", params={"mode": "flood"}, rtt_mean_ms=[0.1], cpu_pct=[5]),
         na("tcp_stream"), na("rfc2544")]


def test_cells_mean_ci_cpu_and_mss_used():
    t = table.build([run(SMALL)])
    assert [c.label for c in t.columns] == ["ovs/vxlan", "linuxbridge/vlan"]
    rows = {(r.label, r.placement): r for r in t.rows}
    same, cross = rows[("tcp_stream mss 1468", "same-host")], rows[("tcp_stream mss 1468", "cross-host")]
    ovs = t.columns[0]
    # records without a CPU method are from before the exact split: labelled, still shown
    assert t.cell(same, ovs).text("gbps") == "1.02 ±0.18 ci @1410 (86% CPU ±13 ci†)"
    assert t.cell(cross, ovs).text("gbps") == "2 [2–2] (150% CPU [150–150]†)"  # nominal MSS: no @
    assert t.cell(rows[("icmp_rtt flood", "same-host")], ovs).text("rtt_mean_ms") == "0.1 (5% CPU†)"


def with_cpu(r, method, **samples):
    return Result(r.test, r.labels, {**r.samples, **samples},
                  provenance={**r.provenance, "cpu": {"method": method}})


@pytest.mark.parametrize("method, err, bound, meas", [
    ("bpf", [0.2, 0.3], False, ""), ("bpf", [2.0, 3.0], False, ", meas. ±2"),
    ("irqtime", [0.1, 0.1], False, ""), ("tick", [1.6, 1.6], True, ", meas. ±2")])
def test_cpu_figure_says_its_method_and_uncertainty(method, err, bound, meas):
    r = with_cpu(rec("icmp_rtt", params={"mode": "deferred"}, rtt_mean_ms=[1.0, 1.0]), method,
                 cpu_pct=[85.0, 87.0], cpu_pct_err=err)
    t = table.build([run([r])])
    cpu = t.cell(t.rows[0], t.columns[0]).text("rtt_mean_ms").split(" (", 1)[1]
    assert cpu.startswith("<=86" if bound else "86") and cpu.endswith(f"{meas})")
    assert "†" not in cpu
    line = next(csv.DictReader(io.StringIO(text.csv_text(t))))
    assert line["cpu_method"] == method and float(line["cpu_pct"]) == 86.0


def test_na_covers_its_tests_rows_and_keeps_a_row_of_its_own():
    t = table.build([run(SMALL)])
    lb = t.columns[1]
    tcp = [r for r in t.rows if r.test == "tcp_stream"]
    assert all(t.cell(r, lb).na == "no 802.1q" for r in tcp)
    assert t.cell(next(r for r in t.rows if r.test == "icmp_rtt"), lb).text("") == ""  # not measured
    assert [r for r in t.rows if r.test == "rfc2544"] == [table.Row("rfc2544", "", "-", "")]


def test_rows_grouped_by_test_variable_placement():
    records = [rec("udp_stream", placement=p, point=f"p={n}", params={"sessions": n}, gbps=[1])
               for p in ("same-host", "cross-host") for n in (1, 5)]
    t = table.build([run(records)])
    assert [(r.variable, r.placement) for r in t.rows] == [
        ("p=1", "same-host"), ("p=1", "cross-host"), ("p=5", "same-host"), ("p=5", "cross-host")]


def test_several_runs_are_columns_side_by_side():
    a = run([rec("icmp_rtt", rtt_mean_ms=[0.1]),
             rec("icmp_rtt", "linuxbridge", "flat", rtt_mean_ms=[0.2])], "a")
    b = run([rec("icmp_rtt", rtt_mean_ms=[0.3])], "b")
    t = table.build([a, b])
    assert [c.label for c in t.columns] == ["ovs/vxlan (a)", "ovs/vxlan (b)", "linuxbridge/flat (a)"]
    row = t.rows[0]
    assert [t.cell(row, c).stat("rtt_mean_ms")["mean"] for c in t.columns] == [0.1, 0.3, 0.2]


def test_real_records():
    t = table.build(load.load([DATA]))
    assert [c.label for c in t.columns] == ["linuxbridge/flat", "linuxbridge/vlan", "ovs/flat", "ovs/vxlan"]
    assert t.tests() == ["icmp_rtt", "tcp_stream", "udp_stream", "broadcast", "flow_setup",
                         "rfc2544_throughput", "rfc2544_latency", "udp_fairness"]
    assert len(t.rows) == 34
    assert all(t.cell(r, t.columns[1]).na == NA_VLAN for r in t.rows)
    tcp = [r for r in t.rows if r.test == "tcp_stream"]
    assert {r.variable for r in tcp} == {"mss 68", "mss 1468", "mss 8908"}
    assert all(r.metric == "gbps" for r in tcp)
    assert "@1410" in t.cell(tcp[2], t.columns[3]).text("gbps")


def test_plain_text_is_compare_table():
    records = list(load.read(DATA / "records.jsonl"))
    out = compare.table(records)
    lines = out.splitlines()
    assert lines[0].split(" | ")[:3] == ["test [metric]                              ", "placement ",
                                         "linuxbridge/flat                         "]
    assert all(line.count(" | ") == 5 for line in lines[2:36]) and lines[36] == ""
    assert f"N/A linuxbridge/vlan: {NA_VLAN}" in out and "100% = one CPU" in out


def test_markdown_shape():
    t = table.build(load.load([DATA]))
    md = text.markdown(t)
    assert [line[3:] for line in md.splitlines() if line.startswith("## ")] == t.tests()
    rows = [line for line in md.splitlines() if line.startswith("|")]
    assert len(rows) == len(t.rows) + 2 * len(t.tests())        # each table: head + rule + rows
    assert all(line.count("|") == 3 + len(t.columns) for line in rows)
    assert "| mss 1468 [gbps] | same-host | 23.9 [20–27.8] ! @1460 (34% CPU [33–35]†) | N/A |" in md


def test_csv_one_line_per_cell_with_raw_numbers():
    t = table.build(load.load([DATA]))
    lines = list(csv.DictReader(io.StringIO(text.csv_text(t))))
    assert tuple(lines[0]) == text.CSV_FIELDS
    assert len(lines) == len(t.rows) * len(t.columns)           # every cell here is filled
    na_lines = [x for x in lines if x["not_applicable"]]
    assert {x["configuration"] for x in na_lines} == {"linuxbridge/vlan"} and len(na_lines) == 34
    vx = next(x for x in lines if x["configuration"] == "ovs/vxlan" and x["variable"] == "mss 1468")
    assert vx["mss_used"] == "1410" and float(vx["mean"]) == pytest.approx(0.872, abs=5e-4)
    assert float(vx["cpu_pct"]) > 50 and int(vx["n"]) == 2


def test_html_tables_charts_and_na_hover():
    runs = load.load([DATA])
    t = table.build(runs)
    page = html.page(runs, t, charts.charts(t))
    for fid in ("fig-rtt", "fig-tcp", "fig-udp", "fig-broadcast", "fig-flow", "fig-cpu"):
        assert f"<figure id='{fid}'><svg" in page
    assert f"<td class='na' title='{NA_VLAN}'>N/A</td>" in page
    assert "<script" not in page and "http://www.w3.org" in page and "src=" not in page
    assert "ovs-vswitchd (Open vSwitch) 3.1.0" in page and "netdev" in page


def test_chart_without_data_is_left_out():
    t = table.build([run([rec("icmp_rtt", params={"mode": "flood"}, rtt_mean_ms=[0.1], cpu_pct=[5])])])
    assert [c.id for c in charts.charts(t)] == ["fig-rtt", "fig-cpu"]


def test_run_names(tmp_path):
    for d in ("a", "b"):
        (tmp_path / d).mkdir()
        shutil.copy(DATA / "records.jsonl", tmp_path / d / "records.jsonl")
    shutil.copy(DATA / "records.jsonl", tmp_path / "old.jsonl")
    runs = load.load([tmp_path / "a", tmp_path / "b" / "records.jsonl", tmp_path / "old.jsonl",
                      tmp_path / "a"])
    assert [r.name for r in runs] == ["a", "b", "old", "a#2"]
    assert table.build(runs[:2]).columns[1].label == "linuxbridge/flat (b)"


@pytest.mark.parametrize("content,problem", [
    (None, "no such file or directory"), ("", "no records"), ("{}\nnot json\n", "not a vnetbench"),
    ('{"test": "x", "labels": {}, "samples": {}}\n', "labels 'vswitch'/'network'"),
    ('{"test": "x"}\n', "no 'labels'"), ('[1, 2]\n', "no 'test'"), ("garbage\n", ":1: not a JSON line")])
def test_bad_input(tmp_path, content, problem):
    path = tmp_path / "r.jsonl"
    if content is not None:
        path.write_text(content)
    with pytest.raises(VnetbenchError, match=problem) as exc:
        load.load([path])
    assert str(exc.value).startswith(str(path)) and "records.jsonl written by vnetbench" in str(exc.value)


def test_directory_without_records(tmp_path):
    with pytest.raises(VnetbenchError, match=f"{tmp_path}: no records.jsonl in this directory"):
        load.load([tmp_path])


def test_cli_writes_into_first_results_dir(tmp_path, capsys):
    shutil.copy(DATA / "records.jsonl", tmp_path / "records.jsonl")
    assert cli.main(["report", str(tmp_path), "--format", "md,csv"]) == 0
    assert capsys.readouterr().out.split() == [str(tmp_path / "report.md"), str(tmp_path / "report.csv")]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["records.jsonl", "report.csv", "report.md"]


def test_cli_default_out_for_a_file(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert cli.main(["report", str(DATA / "records.jsonl"), "--format", "csv"]) == 0
    out = Path(capsys.readouterr().out.strip())
    assert out.parent.parent == Path("results") and out.parent.name.startswith("report-")
    assert out.read_text().startswith("configuration,run,")


def test_cli_bad_input_is_one_line_exit_2(tmp_path, capsys):
    (tmp_path / "x.jsonl").write_text("nope\n")
    assert cli.main(["report", str(tmp_path / "x.jsonl"), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"vnetbench: error: {tmp_path / 'x.jsonl'}:1: not a JSON line")
    assert err.count("\n") == 1
    assert not (tmp_path / "o").exists()


def test_cli_bad_format(capsys):
    assert cli.main(["report", str(DATA), "--format", "pdf"]) == 2
    err = capsys.readouterr().err
    assert "html, md, csv" in err and err.count("\n") == 1


def test_atomic_write_leaves_no_half_file(tmp_path, monkeypatch):
    from vnetbench import outfiles
    write.write({"report.md": "old"}, tmp_path)
    monkeypatch.setattr(outfiles.os, "rename", lambda a, b: (_ for _ in ()).throw(OSError(28, "No space")))
    with pytest.raises(VnetbenchError, match="cannot write .No space.; nothing was written"):
        write.write({"report.md": "new"}, tmp_path)
    assert [p.name for p in tmp_path.iterdir()] == ["report.md"]
    assert (tmp_path / "report.md").read_text() == "old"


def test_records_are_json_lines_as_stored():
    first = json.loads((DATA / "records.jsonl").read_text().splitlines()[0])
    assert first["schema"] == 1 and "metrics" not in first        # trimmed: recomputed from samples


OVN_WHY = "ovn routes inside the vSwitch's own pipeline: not separable"


def routed(vswitch, **samples):
    r = with_cpu(rec("tcp_stream", vswitch=vswitch, placement="cross-host", point="mss 1468",
                     params={"nominal": 1468, "used": 1410}, gbps=[0.8, 0.8]), "bpf",
                 cpu_pct=[120.0, 130.0], cpu_pct_err=[0.1, 0.1], **samples)
    r.labels["path"] = "l3-east-west"
    if "cpu_router_pct" not in samples:
        r.extra["repetitions"] = [{"cpu": {"router": {"not_applicable": OVN_WHY}}}] * 2
    return r


def test_routed_rows_show_the_routers_cpu_beside_the_data_plane_cpu():
    """The router's share sits inside the CPU figure of a routed row ('of which'); a kind
    routing in its vSwitch says N/A and why; an L2 row shows none."""
    ovs = routed("ovs", cpu_router_pct=[3.0, 3.4], cpu_router_pct_err=[0.8, 1.0])
    ovn = routed("ovn")
    l2 = with_cpu(rec("tcp_stream", placement="cross-host", point="mss 1468",
                      params={"nominal": 1468, "used": 1410}, gbps=[1.3]), "bpf",
                  cpu_pct=[100.0], cpu_router_pct=[None], cpu_router_pct_err=[None])
    t = table.build([run([ovs, ovn, l2])])
    rows = {r.placement: r for r in t.rows}
    by = {c.vswitch: c for c in t.columns}
    routed_row = rows["cross-host l3-east-west"]
    assert t.cell(routed_row, by["ovs"]).text("gbps") == "0.8 [0.8–0.8] @1410 (125% CPU [120–130]; router 3.2 ±0.9%)"
    assert t.cell(routed_row, by["ovn"]).text("gbps").endswith("; router N/A)")
    assert "router" not in t.cell(rows["cross-host"], by["ovs"]).text("gbps")
    plain = text.plain(t)
    assert f"router CPU N/A ovn/vxlan: {OVN_WHY}" in plain and "router: of that CPU" in plain
    from html import escape
    assert escape(f"router CPU N/A: {OVN_WHY}") in html.page([run([ovs, ovn])], table.build([run([ovs, ovn])]), [])
    lines = {(x["configuration"], x["placement"]): x for x in csv.DictReader(io.StringIO(text.csv_text(t)))}
    assert float(lines[("ovs/vxlan", "cross-host l3-east-west")]["cpu_router_pct"]) == pytest.approx(3.2)
    assert lines[("ovn/vxlan", "cross-host l3-east-west")]["cpu_router_na"] == OVN_WHY
