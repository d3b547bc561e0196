"""The HTML report as a browser shows it: headless Chromium loads the file (no network,
no scripts), the DOM has every chart with plotted SVG paths, error bars and the tables,
and a screenshot is a real picture, not a blank page."""

import re
import subprocess
from pathlib import Path

import pytest

from vnetbench.report import write

DATA = Path(__file__).resolve().parents[1] / "data" / "report"
CHROMIUM = "chromium"          # a Debian package make installs: missing fails, never skips
FIGURES = ("fig-rtt", "fig-tcp", "fig-udp", "fig-broadcast", "fig-flow", "fig-rfc2544", "fig-cpu")
# charts whose tests/data points have a spread (broadcast loss is 0 throughout; the RFC 2544
# records there predate the search bracket)
WITH_BARS = ("fig-rtt", "fig-tcp", "fig-udp", "fig-flow", "fig-cpu")
TABLES = ("icmp_rtt", "tcp_stream", "udp_stream", "broadcast", "flow_setup",
          "rfc2544_throughput", "rfc2544_latency", "udp_fairness")

@pytest.fixture(scope="module")
def report(tmp_path_factory):
    out = tmp_path_factory.mktemp("report")
    return write.report([DATA], out, ["html"])[0]


def chromium(tmp_path, *args):
    argv = [CHROMIUM, "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
            f"--user-data-dir={tmp_path / 'profile'}", *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=60, check=True)


def test_dom_has_charts_and_tables(report, tmp_path):
    dom = chromium(tmp_path, "--dump-dom", report.as_uri()).stdout
    for fid in FIGURES:
        figure = re.search(rf'<figure id="{fid}">(.*?)</figure>', dom, re.S)
        assert figure, f"{fid} missing from the rendered DOM"
        svg = figure.group(1)
        assert svg.startswith("<svg") and "<figcaption>" in svg
        assert len(re.findall(r"<path [^>]*d=\"M", svg)) >= 10, f"{fid}: no plotted paths"
    for test in TABLES:
        assert f'<table id="table-{test}">' in dom
    assert dom.count('class="na" title="kernel lacks 802.1q VLAN devices') == 34
    assert '<table id="provenance-table">' in dom


def test_dom_has_error_bars(report, tmp_path):
    """Every chart names its error bars in the rendered SVG, and where the data has a
    spread they are drawn: vertical segments of non-zero length."""
    dom = chromium(tmp_path, "--dump-dom", report.as_uri()).stdout
    for fid in FIGURES:
        figure = re.search(rf'<figure id="{fid}">(.*?)</figure>', dom, re.S).group(1)
        caption = re.search(r"<figcaption>(.*?)</figcaption>", figure, re.S).group(1)
        assert "error bars:" in caption, fid
        groups = re.findall(rf'<g id="{fid}-err-[^"]*">(.*?)</g>', figure, re.S)
        assert groups, f"{fid}: no error bars in the rendered DOM"
        segments = [tuple(map(float, m)) for g in groups for m in
                    re.findall(r'd="M\s*([-\d.]+)\s+([-\d.]+)\s+L\s*([-\d.]+)\s+([-\d.]+)', g)]
        assert segments and all(abs(x1 - x2) < 1e-6 for x1, _, x2, _ in segments), fid
        if fid in WITH_BARS:
            assert any(abs(y1 - y2) > 1 for _, y1, _, y2 in segments), f"{fid}: all bars zero"


def test_screenshot_is_not_blank(report, tmp_path):
    from matplotlib import image
    png = tmp_path / "report.png"
    chromium(tmp_path, "--window-size=1280,4000", "--hide-scrollbars", f"--screenshot={png}",
             report.as_uri())
    pixels = image.imread(png)
    assert pixels.shape[:2] == (4000, 1280)
    colors = {tuple(p) for p in pixels[::7, ::7].reshape(-1, pixels.shape[2])}
    assert len(colors) > 50                                   # charts are colourful
    assert (pixels[..., :3] < 0.5).mean() > 0.005             # and there is ink on the page
