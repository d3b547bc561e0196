"""Host-side data-plane CPU over a test window from Prometheus, for backends whose hosts
are other machines (a cloud's compute nodes running vnetbench-collector, scraped by the
user's Prometheus). Without a Prometheus URL or the hosts' names the window is a clear
N/A with the reason, never a local figure passed off as the hosts'."""

from __future__ import annotations

import json
import time
import urllib.parse
import urllib.request

QUERY = 'sum by (host) (increase(vnetbench_dataplane_cpu_seconds_total{{host=~"{hosts}"{more}}}[{secs}s]))'


def query(url: str, promql: str, at: float, timeout: float = 10) -> list:
    """The instant vector of PROMQL at time AT (the HTTP API's /api/v1/query)."""
    q = urllib.parse.urlencode({"query": promql, "time": f"{at:.3f}"})
    with urllib.request.urlopen(f"{url.rstrip('/')}/api/v1/query?{q}", timeout=timeout) as r:
        body = json.loads(r.read())
    if body.get("status") != "success":
        raise ValueError(f"Prometheus: {body.get('error', 'query failed')}")
    return body["data"]["result"]


class Window:
    """``with Window(source): ...`` then ``metrics()`` (cpu_pct, per host in ``result``).
    SOURCE: {"prometheus": URL or '', "hosts": [compute host names]}, or with
    "monitor": the id of vnetbench's own monitor (its Prometheus is in a namespace),
    and "why_not": what to say when there is neither."""

    def __init__(self, source: dict, fetch=query, clock=time.time):
        self.url, self.hosts = source.get("prometheus") or "", list(source.get("hosts") or ())
        self.monitor, self.why_not = source.get("monitor") or "", source.get("why_not") or ""
        self.labels = dict(source.get("labels") or {})      # e.g. the run's own targets only
        if self.monitor:
            self.url = f"monitor {self.monitor}"
            fetch = _monitor_query if fetch is query else fetch
        self.fetch, self.clock = fetch, clock
        self.result: dict = {}
        self._metrics: dict = {}

    def reason(self) -> str:
        if not self.url and self.why_not:
            return self.why_not
        if not self.url:
            return ("no Prometheus URL (--prometheus / 'prometheus:' in the context): host CPU of "
                    "a cloud's compute nodes comes from vnetbench-collector there")
        if not self.hosts:
            return "the VMs' compute host names are unknown (not admin: Nova shows hostId only)"
        return ""

    def __enter__(self):
        self.t0 = self.clock()
        return self

    def __exit__(self, *exc):
        secs = max(1, round(self.clock() - self.t0))
        why = self.reason()
        if why:
            self.result = {"method": "n/a", "reason": why}
            return False
        promql = QUERY.format(hosts="|".join(map(_re_escape, self.hosts)), secs=secs,
                              more="".join(f',{k}="{v}"' for k, v in sorted(self.labels.items())))
        try:
            rows = self.fetch(self.url, promql, self.clock())
        except (OSError, ValueError) as exc:
            self.result = {"method": "n/a", "reason": f"Prometheus {self.url}: {exc}"}
            return False
        hosts = {r["metric"].get("host", "?"): 100.0 * float(r["value"][1]) / secs for r in rows}
        if not hosts:
            self.result = {"method": "n/a", "reason": f"Prometheus has no "
                           f"vnetbench_dataplane_cpu_seconds_total for {', '.join(self.hosts)} "
                           "(collectors deployed and scraped?)"}
            return False
        self.result = {"method": "prometheus", "seconds": secs, "query": promql,
                       "hosts": hosts, "resolution": "the scrape interval"}
        self._metrics = {"cpu_pct": sum(hosts.values())}
        return False

    def metrics(self) -> dict:
        return dict(self._metrics)


def _monitor_query(url: str, promql: str, at: float) -> list:
    """query() against vnetbench's own monitor (URL: "monitor ID")."""
    from vnetbench.errors import VnetbenchError
    from vnetbench.monitor import server
    try:
        return server.attach(url.split()[-1]).query(promql, at)
    except VnetbenchError as exc:
        raise ValueError(str(exc)) from None


def _re_escape(name: str) -> str:
    return "".join("\\\\" + c if c in ".^$*+?()[]{}|\\" else c for c in name)
