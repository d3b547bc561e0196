"""Where Faucet is installed: its own virtual environment (it pins os-ken 3.1.0, which
vnetbench's own os-ken apps cannot share), found without a run, so the kind's
description can say it is missing."""

from __future__ import annotations

import os
import sys
from pathlib import Path

ENV_VENV = "VNETBENCH_FAUCET_VENV"


def venv() -> Path:
    """Faucet's virtual environment: $VNETBENCH_FAUCET_VENV, else ``<this venv>-faucet``
    (``make faucet`` puts it beside vnetbench's ``.venv``)."""
    return Path(os.environ.get(ENV_VENV) or f"{sys.prefix}-faucet")


def manager() -> Path:
    return venv() / "bin" / "osken-manager"
