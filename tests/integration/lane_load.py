"""A stand-in for the guests lane's load, to check a whole-machine test beside it.

The guests lane keeps both CPUs busy for minutes at a time: TCG guests are CPU-bound
emulators, and the cloud's daemons start and poll beside them. This runs one CPU-bound
process per CPU in units of ``--unit-s`` seconds, each unit inside a machine-lock share as
a guests-lane module is (tests/integration/turns.py), so a whole-machine test of the other
lane gets its turn between units; ``--no-turns`` takes none (the lanes before turns).

    VNETBENCH_MACHINE_LOCK=/tmp/m.lock python tests/integration/lane_load.py --seconds 300

It prints one line per unit (when it ran, how long it waited for its share) and stops
after ``--seconds`` or on SIGTERM/SIGINT, its burners with it (they are its children,
in its process group, stopped by pid).
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time

from vnetbench import machinelock

BURN = "while True: pass"


def _unit(cpus: int, seconds: float) -> None:
    burners = [subprocess.Popen([sys.executable, "-c", BURN]) for _ in range(cpus)]
    try:
        time.sleep(seconds)
    finally:
        for p in burners:
            p.kill()
            p.wait()


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cpus", type=int, default=os.cpu_count() or 2)
    p.add_argument("--unit-s", type=float, default=5.0)
    p.add_argument("--seconds", type=float, default=600.0)
    p.add_argument("--no-turns", action="store_true", help="take no machine-lock share")
    args = p.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    end = time.monotonic() + args.seconds
    try:
        while time.monotonic() < end:
            if args.no_turns:
                _unit(args.cpus, args.unit_s)
                continue
            with machinelock.turn(False, "lane_load") as waited:
                print(f"{time.strftime('%H:%M:%S')} unit of {args.unit_s:g} s on {args.cpus} CPUs "
                      f"(waited {waited:.1f} s for its share)", flush=True)
                _unit(args.cpus, args.unit_s)
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
