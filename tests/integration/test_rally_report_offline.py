"""The Rally HTML report the suite writes renders with no network at all: headless
Chromium runs in a fresh network namespace (not even loopback is up) and still finds
Rally's charts drawn as SVG, the workloads named by test and configuration in the menu
and the overview, and vnetbench's tables. Rally's default report (libraries from a
CDN) is checked the same way and stays blank, so the test can tell the two apart."""

import json
import re
import subprocess
from pathlib import Path

import pytest

from vnetbench import compare

REPO = Path(__file__).resolve().parents[2]
ARGS = {"vswitch": "linuxbridge", "network": "flat", "repetitions": 1, "deferred_count": 2,
        "flood_count": 50, "flood_interval_s": 0.005, "sweep_count": 10, "payloads": [64, 1400]}
NAMES = ("icmp_rtt.linuxbridge-flat-deferred", "icmp_rtt.linuxbridge-flat-flood",
         "icmp_rtt.linuxbridge-flat-flood-payload-sweep")


@pytest.fixture(scope="module")
def task(rally, tmp_path_factory, caps):
    from vnetbench.testbed.model import NetType, VSwitchKind
    if caps.why_not(VSwitchKind.LINUXBRIDGE, NetType.FLAT):
        pytest.skip(caps.why_not(VSwitchKind.LINUXBRIDGE, NetType.FLAT))
    out = tmp_path_factory.mktemp("rally-offline")
    args = json.dumps({**ARGS, "results": str(out / "records.jsonl")})
    log = rally("task", "start", "--env", "vnetbench", str(REPO / "rally-tasks" / "icmp-rtt.yaml"),
                "--task-args", args).stdout
    return rally, log.split("rally task report ")[1].split()[0], out


def offline_dom(tmp_path, url: str) -> str:
    """The DOM after scripts ran, in a browser that has no network interface up."""
    argv = ["unshare", "--net", "chromium", "--headless=new", "--no-sandbox", "--disable-gpu",
            "--no-first-run", f"--user-data-dir={tmp_path / 'profile'}", "--window-size=1280,2000",
            "--virtual-time-budget=10000", "--dump-dom", url]
    return subprocess.run(argv, capture_output=True, text=True, timeout=90, check=True).stdout


def visible_text(dom: str) -> str:
    body = re.sub(r"<script.*?</script>", " ", dom[dom.find("<body"):], flags=re.S)
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", body))


def test_suite_report_renders_offline(task, tmp_path):
    rally, uuid, out = task
    report = compare.rally_report(rally, uuid, out / "rally-report.html")
    assert "cdnjs.cloudflare.com" not in report.read_text()       # libraries are inlined

    overview = visible_text(offline_dom(tmp_path, report.as_uri()))
    for name in NAMES:                                  # menu and overview name the configuration
        assert overview.count(name.split(".")[1]) >= 2, name
        assert name in overview, name

    page = offline_dom(tmp_path, f"{report.as_uri()}#/{NAMES[1]}/overview")
    charts = re.findall(r"<svg.*?</svg>", page, re.S)
    drawn = [c for c in charts if 'class="nvd3' in c and re.search(r'<path[^>]* d="M', c)]
    assert len(drawn) >= 2, f"{len(charts)} SVG elements, {len(drawn)} with plotted nvd3 paths"

    output = visible_text(offline_dom(tmp_path, f"{report.as_uri()}#/{NAMES[0]}/output"))
    assert "linuxbridge/flat · single-packet time-deferred ICMP RTT" in output
    assert "vnetbench metrics" in output and "cross-host rtt_mean_ms" in output
    metrics = output.split("vnetbench metrics", 1)[1][:400]
    assert "Metric (unit in its name)" in metrics and "(sec)" not in metrics   # not Rally's labels


def test_input_file_keeps_real_scenario_names(task, tmp_path):
    rally, uuid, out = task
    report = compare.rally_report(rally, uuid, out / "config.html")
    config = visible_text(offline_dom(tmp_path, f"{report.as_uri()}#/{NAMES[0]}/config"))
    assert "VnetBench.icmp_rtt" in config and '"mode": "deferred"' in config.replace("&quot;", '"')


def test_rally_default_report_is_blank_offline(task, tmp_path):
    """What the suite's report avoids: Rally's default HTML needs its CDN."""
    rally, uuid, out = task
    plain = out / "plain.html"
    rally("task", "report", uuid, "--out", str(plain))
    text = visible_text(offline_dom(tmp_path, plain.as_uri()))
    assert not any(name.split(".")[1] in text for name in NAMES)
    assert "icmp_rtt" not in text
