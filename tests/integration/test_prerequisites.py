"""What 'make install' provides is here: a missing program or Python package fails
here, so the other tests' skips (which name what this machine lacks) never hide a
broken install; they skip only for what the kernel lacks."""

from vnetbench import kinds


def test_every_program_and_package_the_kinds_need_is_installed(caps):
    import os_ken  # noqa: F401   (ovs-openflow's controller, vrouter's agents)
    from vnetbench.kinds.faucet import netns as faucet
    missing = {k: caps.missing_programs(k) for k in kinds.names()}
    assert not any(missing.values()), f"run 'make install': {missing}"
    assert faucet.manager().exists(), f"run 'make install' (make faucet): no {faucet.manager()}"


def test_the_tools_beside_the_kinds_are_installed():
    """bpftrace (the exact CPU split's probe: test_cpu_split skips only for the kernel's
    missing CONFIG_IRQ_TIME_ACCOUNTING, never for a missing bpftrace), socat (the relay to a
    remote hypervisor's collector), the monitor's Prometheus and Pushgateway."""
    import shutil
    missing = [p for p in ("bpftrace", "socat", "prometheus", "prometheus-pushgateway")
               if not shutil.which(p)]
    assert not missing, f"run 'make install': {missing} not found"


def test_the_native_flow_generator_is_built():
    """make builds vnetbench-flowgen (Go): test_probe_native skips without it, so its
    absence must fail here, not pass as a skip."""
    from vnetbench.traffic import flowgen
    flowgen.binary()        # raises, naming make flowgen, when it is not there
