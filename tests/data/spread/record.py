"""Re-record tests/data/spread/records.jsonl (root, embedded testbed, about 2 minutes):

    VNETBENCH_STATE_DIR=/tmp/me-state .venv/bin/python tests/data/spread/record.py

Real records with the sample sizes the spread rules tell apart: an RTT flood of 4 x 25
= 100 echoes (echoes kept), TCP with 3 repetitions, UDP with 30, an RFC 2544 NDR/PDR
search (its final bracket) and its latency echoes. The CPU windows' raw readings are
dropped from the extras to keep the file small; everything the report reads stays."""

import os
import sys
from pathlib import Path

from vnetbench.battery import rfc2544, rtt, tcp, udp
from vnetbench.monitor import watch
from vnetbench.results.store import ResultStore
from vnetbench.testbed.loader import load

HERE = Path(__file__).resolve().parent


def measure(dep):
    pair = dep.testbed.pair("cross")
    yield rtt.run(dep, pair, "flood", count=25, interval_s=0.01, repetitions=4)
    yield from tcp.run(dep, pair, nominal_mss=[1468], seconds=1, repetitions=3)
    yield from udp.run(dep, pair, sessions=[1], seconds=1, repetitions=30)
    yield from rfc2544.run(dep, pair, frame_sizes=[64], trial_s=1, max_trials=6,
                           measures=("throughput", "latency"))


def trimmed(r):
    for rep in r.extra.get("repetitions", []):
        rep.pop("cpu", None)
    return r


def main():
    tb = load(HERE.parents[2] / "examples" / "ovs-vxlan.yaml", online_cpus=sorted(os.sched_getaffinity(0)))
    out = HERE / "records.jsonl"
    out.unlink(missing_ok=True)
    dep = watch.up(tb, None)
    try:
        store = ResultStore(out)
        for r in measure(dep):
            store.append(trimmed(r))
            print(r.test, r.labels.get("point", ""), file=sys.stderr)
    finally:
        dep.down()


if __name__ == "__main__":
    main()
