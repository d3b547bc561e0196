"""What 'make install' provides is here: a missing program or Python package fails
here, so the other tests' skips (which name what this machine lacks) never hide a
broken install; they skip only for what the kernel lacks."""

from vnetbench.testbed.capabilities import IMPLEMENTED


def test_every_program_and_package_the_kinds_need_is_installed(caps):
    import os_ken  # noqa: F401   (ovs-openflow's controller, vrouter's agents)
    missing = {k.value: caps.missing_programs(k) for k in IMPLEMENTED}
    assert not any(missing.values()), f"run 'make install': {missing}"
