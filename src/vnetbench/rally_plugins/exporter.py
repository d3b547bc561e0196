"""``vnetbench-html``: Rally's self-contained HTML report (``html-static``: AngularJS
and the chart libraries inlined, so it renders without internet) in which every
workload is named by what it measured.

Rally names a workload by its scenario, so the matrix reads ``broadcast``,
``broadcast [2]`` … ``broadcast [10]``. Here the menu groups workloads by test and
names each by configuration (``broadcast`` › ``linuxbridge-flat``), so the overview
reads like the comparison table. Rally splits a workload name at its one dot and
keeps only ``[A-Za-z0-9_.-]`` in links, hence the spelling.
"""

from __future__ import annotations

import json
import os
import re

from rally.common import objects, version
from rally.plugins.task.exporters.html import HTMLStaticExporter
from rally.task import exporter
from rally.task.processing import plot
from rally.ui import utils as ui_utils

from vnetbench import kinds

CONTEXT = "vnetbench_testbed"


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_-]+", "-", str(text)).strip("-") or "x"


def configuration(contexts: dict) -> str:
    """``vswitch-network`` of the testbed context, the file's stem for a file testbed."""
    ctx = (contexts or {}).get(CONTEXT)
    if ctx is None:
        return "default"
    if ctx.get("file"):
        return _slug(str(ctx["file"]).rsplit("/", 1)[-1].rsplit(".", 1)[0])
    return f"{_slug(ctx.get('vswitch', kinds.DEFAULT))}-{_slug(ctx.get('network', 'vxlan'))}"


def workload_name(workload: dict) -> str:
    """``<test>.<configuration>[-<variant>]``, e.g. ``icmp_rtt.ovs-vxlan-deferred``."""
    test = workload["name"].split(".", 1)[-1]
    args = workload.get("args") or {}
    variant = [_slug(args["mode"])] if "mode" in args else []
    if args.get("payloads"):        # icmp_rtt's RTT-vs-payload sweep
        variant.append("payload-sweep")
    return f"{_slug(test)}." + "-".join([configuration(workload.get("contexts")), *variant])


def describe(workload: dict) -> str:
    """The configuration in words, kept ahead of any description the task gave."""
    ctx = (workload.get("contexts") or {}).get(CONTEXT, {})
    where = (f"testbed {ctx['file']}" if ctx.get("file") else
             f"{ctx.get('vswitch', kinds.DEFAULT)}/{ctx.get('network', 'vxlan')}")
    own = workload.get("description") or ""
    return own if own.startswith(where) else f"{where} · {own}" if own else where


@exporter.configure("vnetbench-html")
class VnetbenchHTMLExporter(HTMLStaticExporter):
    """Rally's static HTML report with workloads named test › configuration; the input
    file and each workload's configuration keep the real scenario names."""

    def generate(self):
        tasks = self._generate_results()
        source = plot._make_source(tasks)          # rally==5.1.1 is pinned
        workloads, real = [], {}
        for task in tasks:
            for subtask in task["subtasks"]:
                for workload in subtask["workloads"]:
                    config = json.dumps(objects.Workload.to_task(workload), indent=2)
                    workload = {**workload, "description": describe(workload),
                                "name": workload_name(workload)}
                    real.setdefault(workload["name"], []).append(config)
                    workloads.append(workload)
        data = plot._process_workloads(workloads)
        for entry in data:
            entry["config"] = real[f"{entry['cls']}.{entry['met']}"][int(entry["pos"])]
        report = ui_utils.get_template("task/report.html").render(
            version=version.version_string(), source=json.dumps(source),
            data=json.dumps(data), include_libs=True)
        if self.output_destination:
            return {"files": {self.output_destination: report},
                    "open": "file://" + os.path.abspath(self.output_destination)}
        return {"print": report}
