"""``vnetbench`` and ``python -m vnetbench``. Loading the command line's modules takes a
second or more on a loaded machine; a Ctrl-C then finds nothing built, so it ends the
program at once, as main() would, instead of with an import traceback."""

import os
import signal
import sys


def _interrupted_while_starting(signum, frame):
    os.write(2, b"vnetbench: interrupted\n")
    os._exit(128 + signum)


def run() -> int:
    early = signal.getsignal(signal.SIGINT) is signal.default_int_handler   # an inherited SIG_IGN stays
    if early:
        signal.signal(signal.SIGINT, _interrupted_while_starting)
    from vnetbench.cli import main
    if early:                                  # from here on main() unwinds what it builds
        signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        return main()
    except KeyboardInterrupt:                  # while main() parsed the arguments
        os.write(2, b"vnetbench: interrupted\n")
        return 130


if __name__ == "__main__":
    sys.exit(run())
