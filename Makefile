# vnetbench: `make demo` installs everything and runs the main job (the quick
# overlay comparison through Rally) on the embedded testbed; `make test`
# installs everything and runs the tests.
# Both need root (apt-get, network namespaces) on Debian 12. Packages install with
# daemons kept stopped (policy-rc.d: no systemd here; tools/aio starts its own) and
# debconf's defaults (no database or Keystone set up by the packages).

PYTHON   ?= python3
VENV     ?= .venv
# the all-in-one OpenStack of the integration tests (tools/aio/README.md): Epoxy's programs
# come from its root (built into the cache by `make install`: aio-root), the database,
# message bus, libvirtd and QEMU from this machine; Zed's are Debian 12's own packages
# (`make install-zed`, for `aio up --release zed`)
AIO_PACKAGES := mariadb-server rabbitmq-server python3-pymysql genisoimage sudo rsync debootstrap
ZED_PACKAGES := keystone glance placement-api nova-api nova-conductor nova-scheduler nova-compute \
                neutron-server neutron-openvswitch-agent heat-api heat-engine \
                python3-openstackclient uwsgi-core uwsgi-plugin-python3
APT_PACKAGES := iproute2 iputils-ping util-linux procps ethtool iperf3 tcpdump \
                openvswitch-switch ovn-central ovn-host python3-venv python3-pip python3-dev gcc chromium bpftrace \
                prometheus prometheus-pushgateway postgresql \
                busybox-static dash dropbear-bin arping cpio syslinux syslinux-common mtools \
                dosfstools qemu-utils qemu-system-x86 wget socat \
                libvirt-daemon-system libvirt-dev pkg-config \
                python3-heat \
                python3-neutron ipset iptables conntrack \
                $(AIO_PACKAGES)
PYTEST_ARGS ?=

.PHONY: install install-zed aio-root deps venv faucet flowgen demo smoke test unit integration functional capabilities cleanup clean dashboards image schema

# the two virtual environments and the Go tools build side by side once the Debian
# packages are in (each waits on the network and pip, not on a CPU)
install: deps
	@$(MAKE) --no-print-directory -j2 venv faucet flowgen aio-root

# the Epoxy cloud's Debian 13 root, into the cache (a second build is the cached root: 0.4 s)
aio-root: venv
	$(VENV)/bin/python -m vnetbench.aio root build --release epoxy

install-zed: install
	@$(MAKE) --no-print-directory deps APT_PACKAGES="$(ZED_PACKAGES)"

deps:
	@if [ "$$(id -u)" != 0 ]; then echo "make: needs root (apt-get, network namespaces); run: sudo make $(MAKECMDGOALS)" >&2; exit 2; fi
	@missing=$$(for p in $(APT_PACKAGES); do dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q '^install ok installed' || echo $$p; done); \
	command -v go >/dev/null 2>&1 || missing="$$missing golang-go"; \
	if [ -n "$$missing" ]; then \
	  echo "apt-get install $$missing"; \
	  policy=; if [ ! -e /usr/sbin/policy-rc.d ]; then policy=1; \
	    printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d; chmod 755 /usr/sbin/policy-rc.d; fi; \
	  apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $$missing; \
	  rc=$$?; [ -z "$$policy" ] || rm -f /usr/sbin/policy-rc.d; [ $$rc = 0 ] || exit $$rc; \
	fi

venv: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml collectors/pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install -q --upgrade pip
	$(VENV)/bin/pip install -q -e '.[test,tox]'
	$(VENV)/bin/pip install -q -e ./collectors
	touch $@

# Faucet (the faucet kind) in its own environment: it pins os-ken 3.1.0 beside our 4.2.0.
# Its requirements.txt also names an ncclient archive on GitHub that Faucet's code never
# imports (so it is not installed); the rest are its pins.
FAUCET_VENV := $(VENV)-faucet
FAUCET_DEPS := os_ken==3.1.0 chewie==0.0.25 beka==0.4.2 'networkx>=1.9' 'pbr>=1.9' \
               prometheus_client==0.24.1 ruamel.yaml==0.18.16 'pytricia>=1.0.0'
faucet: $(FAUCET_VENV)/.installed

$(FAUCET_VENV)/.installed:
	$(PYTHON) -m venv $(FAUCET_VENV)
	$(FAUCET_VENV)/bin/pip install -q --upgrade pip
	$(FAUCET_VENV)/bin/pip install -q --no-deps faucet==1.10.12
	$(FAUCET_VENV)/bin/pip install -q $(FAUCET_DEPS)
	touch $@

flowgen: $(VENV)/bin/vnetbench-flowgen

$(VENV)/bin/vnetbench-flowgen: $(VENV)/.installed $(wildcard tools/flowgen/*.go) tools/flowgen/go.mod
	sh tools/flowgen/build.sh $(VENV)/bin

demo: install
	$(VENV)/bin/vnetbench testbed capabilities
	$(VENV)/bin/vnetbench compare --profile quick

smoke: install
	$(VENV)/bin/vnetbench demo

# unit tests (on every CPU: they share nothing); then the integration tests as two lanes
# at once, each one test at a time (they mostly wait on timers and guests: one lane alone
# leaves most of the two CPUs idle; tests/integration/lanes.py): the namespace tests, and
# the guests' lane (the functional matrix's quick subset, every row on one network type
# per kind, then the libvirt guests and the all-in-one cloud), its output printed after;
# all run even if one fails, the exit status is the first failure's
# the lanes take turns with the machine (tests/integration/turns.py): a test or functional row
# whose verdict rests on a CPU share, a rate or a pause runs while the other lane waits;
# each lane's pytest temp tree and the guests' lane's log in a directory of this run's own;
# as pytest does with its own, the last three runs' stay (a run killed mid-test keeps its
# journals where `vnetbench cleanup` finds them); the guests' lane's default state root is
# its own
GUESTS_STATE ?= /run/vnetbench-guests
test: install
	$(VENV)/bin/pytest -ra -n $$(nproc) $(PYTEST_ARGS) tests/unit; u=$$?; \
	ls -dt /tmp/vnetbench-lanes.* 2>/dev/null | tail -n +3 | xargs -r rm -rf; \
	lanes=$$(mktemp -d /tmp/vnetbench-lanes.XXXXXX); \
	export VNETBENCH_MACHINE_LOCK=$$lanes/machine.lock; \
	echo "the guests' lane (functional matrix, libvirt guests, all-in-one cloud) runs beside the"; \
	echo "namespace tests; its output: $$lanes/guests.log, printed when both are done"; \
	( export VNETBENCH_TEST_LANE=guests VNETBENCH_STATE_DIR=$(GUESTS_STATE); \
	  $(VENV)/bin/vnetbench functional --quick; b=$$?; \
	  $(VENV)/bin/pytest -ra $(PYTEST_ARGS) --basetemp=$$lanes/guests tests/integration; g=$$?; \
	  exit $$(( g ? g : b )) ) > $$lanes/guests.log 2>&1 & lane=$$!; \
	VNETBENCH_TEST_LANE=netns $(VENV)/bin/pytest -ra $(PYTEST_ARGS) --basetemp=$$lanes/netns tests/integration; a=$$?; \
	wait $$lane; g=$$?; \
	echo "==================== the guests' lane ($$lanes/guests.log) ===================="; \
	cat $$lanes/guests.log; \
	exit $$(( u ? u : a ? a : g ))

unit: venv
	$(VENV)/bin/pytest -ra -n $$(nproc) tests/unit

# regenerate schemas/testbed.schema.json: the packaged schema with every registered
# vSwitch kind and its options (vnetbench.kinds) put in
schema: venv
	$(VENV)/bin/vnetbench testbed schema > schemas/testbed.schema.json
	cp src/vnetbench/schemas/workload.schema.json src/vnetbench/schemas/hosts.schema.json \
	   src/vnetbench/schemas/capacity-profile.schema.json src/vnetbench/schemas/record.schema.json schemas/

# regenerate dashboards/json/ from src/vnetbench/dashboards/ (CHECK=1: only compare)
dashboards: venv
	$(VENV)/bin/python -m vnetbench.dashboards.generate $(if $(CHECK),--check)

integration: install
	$(VENV)/bin/pytest -ra tests/integration

# the functional matrix (isolation, rate limiting, ...) on every kind x type buildable here
functional: install
	$(VENV)/bin/vnetbench functional

# the guest image for real VMs (vm-images/README.md): kernel + initrd, raw and qcow2 disk
image: install
	$(VENV)/bin/vnetbench image build --out vm-images/build

capabilities: venv
	$(VENV)/bin/vnetbench testbed capabilities

cleanup: venv
	$(VENV)/bin/vnetbench cleanup

clean:
	rm -rf $(VENV) $(FAUCET_VENV) build *.egg-info src/*.egg-info .pytest_cache
