"""Functional tests build real testbeds in network namespaces: they need root."""

import os

import pytest

from vnetbench.testbed import capabilities


def pytest_collection_modifyitems(config, items):
    if os.geteuid() != 0:
        skip = pytest.mark.skip(reason="needs root (CAP_NET_ADMIN, CAP_SYS_ADMIN) to create namespaces")
        for item in items:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def caps():
    return capabilities.probe()


@pytest.fixture
def state_dir(tmp_path, monkeypatch):
    """Each test keeps its runs in a private state root, so it can find exactly its own."""
    root = tmp_path / "state"
    monkeypatch.setenv("VNETBENCH_STATE_DIR", str(root))
    return root
