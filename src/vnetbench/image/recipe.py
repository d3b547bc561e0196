"""What the test guest carries: pure data, no system access.

A Debian cloud kernel and a busybox initramfs that is also the root file system, so one
build serves direct kernel boot (libvirt) and, wrapped in a bootable disk, clouds.
Everything comes from Debian packages: the kernel is downloaded as a .deb, the tools
are copied from their installed Debian packages with the libraries ``ldd`` names.
"""

from __future__ import annotations

from dataclasses import dataclass

KERNEL_META = "linux-image-cloud-amd64"       # its one dependency is the versioned kernel

# (path on the build machine, Debian package that provides it); copied to the same path.
# Real tools live in /usr (ahead of busybox's /bin applets on PATH), and commands run
# under dash: busybox's ash would run its own applets (ping, ip, ...) even where a real
# tool is on PATH, and the executors parse the real tools' output.
TOOLS = (
    ("/usr/bin/dash", "dash"),
    ("/usr/bin/ip", "iproute2"),
    ("/usr/bin/ss", "iproute2"),                 # the battery waits for listeners with ss
    ("/usr/sbin/tc", "iproute2"),
    ("/usr/bin/iperf3", "iperf3"),
    ("/usr/bin/ping", "iputils-ping"),           # the ping executor parses iputils' output
    ("/usr/sbin/arping", "arping"),
    ("/usr/bin/tcpdump", "tcpdump"),
    ("/usr/sbin/ethtool", "ethtool"),
    ("/usr/sbin/dropbear", "dropbear-bin"),      # the command channel (SSH, key-only)
    ("/usr/bin/wget", "wget"),                  # busybox-static's wget segfaults in glibc's NSS
    ("/bin/busybox", "busybox-static"),
)
PACKAGES = tuple(sorted({pkg for _, pkg in TOOLS} | {"cpio", "syslinux", "syslinux-common",
                                                     "mtools", "dosfstools", "qemu-utils"}))

# virtio-net and what it needs, in load order (the cloud kernel builds them as modules)
MODULES = (
    "kernel/drivers/virtio/virtio_ring.ko",
    "kernel/drivers/virtio/virtio.ko",
    "kernel/drivers/virtio/virtio_pci_legacy_dev.ko",
    "kernel/drivers/virtio/virtio_pci_modern_dev.ko",
    "kernel/drivers/virtio/virtio_pci.ko",
    "kernel/net/core/failover.ko",
    "kernel/drivers/net/net_failover.ko",
    "kernel/drivers/net/virtio_net.ko",
    # the config drive an OpenStack VM gets: an ISO 9660 CD-ROM on the IDE bus
    "kernel/drivers/scsi/scsi_common.ko",
    "kernel/drivers/scsi/scsi_mod.ko",
    "kernel/drivers/ata/libata.ko",
    "kernel/drivers/ata/ata_piix.ko",
    "kernel/drivers/cdrom/cdrom.ko",
    "kernel/drivers/scsi/sr_mod.ko",
    "kernel/fs/isofs/isofs.ko",
)

READY = "vnetbench-guest: ready"                # printed on the serial console when sshd runs
CONSOLE = "console=ttyS0"


@dataclass(frozen=True)
class GuestNic:
    """Static addressing of one guest NIC, passed on the kernel command line."""
    index: int
    cidr: str                   # "198.19.1.11/24"
    mtu: int = 1500


def cmdline(nics: tuple[GuestNic, ...] = (), key: str | None = None, tx_csum: bool = False,
            gateway: str | None = None, mgmt: int | None = None) -> str:
    """Kernel command line for direct boot. Without NICs the guest asks DHCP on eth0 and
    reads its SSH key from the metadata service, as a cloud VM does. MGMT is the index of
    a NIC that only comes up (IPv6 link-local: the command channel, no address to plan)."""
    args = [CONSOLE, "quiet", "panic=-1"]
    for nic in nics:
        args.append(f"vnb.ip{nic.index}={nic.cidr},{nic.mtu}")
    if mgmt is not None:
        args.append(f"vnb.mgmt={mgmt}")
    if gateway:
        args.append(f"vnb.gw={gateway}")
    if key:
        kind, blob = key.split()[:2]
        args += [f"vnb.keytype={kind}", f"vnb.key={blob}"]
    if tx_csum:
        args.append("vnb.txcsum=on")
    return " ".join(args)


INIT = r"""#!/bin/busybox sh
# vnetbench test guest: the initramfs is the root file system.
/bin/busybox --install -s /bin
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
mount -t proc proc /proc; mount -t sysfs sys /sys; mount -t devtmpfs dev /dev
mkdir -p /dev/pts /tmp /run; mount -t devpts devpts /dev/pts
mount -t tmpfs tmp /tmp; mount -t tmpfs run /run
for m in $(cat /etc/vnetbench/modules); do insmod /lib/modules/$m || echo "insmod $m failed"; done
ip link set lo up
txcsum=off; key=; keytype=ssh-ed25519; gw=; static=; mgmt=
for arg in $(cat /proc/cmdline); do
  case "$arg" in
    vnb.ip[0-9]*=*) n=${arg%%=*}; n=${n#vnb.ip}; v=${arg#*=}
                    echo "${n} ${v%,*} ${v##*,}" >> /run/nics; static=1 ;;
    vnb.gw=*) gw=${arg#*=} ;;
    vnb.mgmt=*) mgmt=${arg#*=}; static=1 ;;
    vnb.key=*) key=${arg#*=} ;;
    vnb.keytype=*) keytype=${arg#*=} ;;
    vnb.txcsum=*) txcsum=${arg#*=} ;;
  esac
done
configdrive() {  # mount the config drive (ISO 9660, label config-2) if the VM has one
  i=0; while [ ! -b /dev/sr0 ] && [ $i -lt 30 ]; do sleep 0.1; i=$((i+1)); done
  mkdir -p /run/config
  [ -b /dev/sr0 ] && mount -t iso9660 -o ro /dev/sr0 /run/config 2>/dev/null && \
    [ -f /run/config/openstack/latest/network_data.json ]
}
last=eth${mgmt:-0}      # the management NIC is the last one
i=0; while [ ! -e /sys/class/net/$last ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i+1)); done
if [ -n "$static" ]; then
  [ -f /run/nics ] && while read n cidr mtu; do
    ip link set eth$n mtu $mtu up && ip addr add $cidr dev eth$n
  done < /run/nics
  [ -n "$gw" ] && ip route add default via $gw
  [ -n "$mgmt" ] && ip link set eth$mgmt up
elif configdrive; then      # an OpenStack VM: addresses from the config drive
  awk -v want=nics -f /etc/vnetbench/cdjson.awk /run/config/openstack/latest/network_data.json \
    > /run/cdnics
  while read mac cidr mtu gw; do    # each NIC by its MAC, waited for (up to 10 s): a second
    i=0; dev=""                   # NIC may appear after the first under load
    while [ -z "$dev" ] && [ $i -lt 100 ]; do
      for nic in /sys/class/net/eth*; do
        [ "$(cat $nic/address 2>/dev/null)" = "$mac" ] && dev=${nic##*/}
      done
      [ -z "$dev" ] && { sleep 0.1; i=$((i+1)); }
    done
    [ -n "$dev" ] && ip link set $dev mtu $mtu up && ip addr add $cidr dev $dev
    # the subnet's gateway (a router's interface): the first NIC's that has one
    [ -n "$dev" ] && [ -n "$gw" ] && ip route add default via $gw dev $dev 2>/dev/null
    [ -z "$dev" ] && echo "no NIC with MAC $mac after 10 s"
  done < /run/cdnics
else
  ip link set eth0 up; udhcpc -q -t 10 -i eth0 -s /etc/vnetbench/udhcpc.script
fi
for nic in /sys/class/net/eth*; do ethtool -K ${nic##*/} tx $txcsum >/dev/null 2>&1; done
mkdir -p /root/.ssh; chmod 700 /root/.ssh
if [ -n "$key" ]; then
  echo "$keytype $key" > /root/.ssh/authorized_keys
elif [ -f /run/config/openstack/latest/meta_data.json ]; then
  awk -v want=keys -f /etc/vnetbench/cdjson.awk /run/config/openstack/latest/meta_data.json \
    > /root/.ssh/authorized_keys
else    # a cloud: the EC2-style metadata path OpenStack also serves
  /usr/bin/wget -q -T 5 -t 2 -O /root/.ssh/authorized_keys \
    http://169.254.169.254/latest/meta-data/public-keys/0/openssh-key || echo "no SSH key found"
fi
chmod 600 /root/.ssh/authorized_keys 2>/dev/null
mkdir -p /etc/dropbear
dropbear -R -s -p 22 -P /run/dropbear.pid
# ready means reachable: wait (up to 10 s) until no IPv6 address is still tentative (DAD)
tentative() { while read a i p sc f n; do [ $(( 0x$f & 0x40 )) -ne 0 ] && return 0; done \
  < /proc/net/if_inet6; return 1; }
i=0; while tentative && [ $i -lt 100 ]; do sleep 0.1; i=$((i+1)); done
echo "VNETBENCH_READY"
while true; do setsid cttyhack sh -l; sleep 1; done
"""

UDHCPC_SCRIPT = r"""#!/bin/sh
case "$1" in
  bound|renew)
    ip addr flush dev $interface; ip addr add $ip/${mask:-24} dev $interface
    [ -n "$mtu" ] && ip link set $interface mtu $mtu
    for r in $router; do ip route add default via $r dev $interface; break; done
    set -- $staticroutes        # option 121, how Neutron may route the metadata address
    while [ $# -ge 2 ]; do ip route add $1 via $2 dev $interface; shift 2; done
    : > /etc/resolv.conf; for d in $dns; do echo "nameserver $d" >> /etc/resolv.conf; done ;;
esac
"""

# The config drive's JSON read without a JSON tool (the guest has busybox awk): one token
# per line, nesting tracked by depth. want=nics prints "mac address/netmask mtu" for each
# IPv4 network of network_data.json (and its default route's gateway where the subnet has
# one), want=keys the public keys of meta_data.json. Strings
# holding brackets or braces would confuse it; these files carry none where it reads.
CDJSON_AWK = r"""
{ doc = doc $0 " " }
function close_obj(list) {
  if (list == "links") { mac[cur["id"]] = cur["ethernet_mac_address"]; mtu[cur["id"]] = cur["mtu"] }
  if (list == "networks" && cur["type"] == "ipv4") {
    nets++; link[nets] = cur["link"]; addr[nets] = cur["ip_address"] "/" cur["netmask"]
    gw[nets] = cur["default_gw"]
  }
  for (k in cur) delete cur[k]
}
END {
  gsub(/[][{},]/, "\n&\n", doc)
  n = split(doc, tok, "\n")
  for (i = 1; i <= n; i++) {
    t = tok[i]; gsub(/^[ \t]+|[ \t]+$/, "", t)
    if (t == "{" || t == "[") { d++; under[d] = pend; pend = ""; continue }
    if (t == "}" || t == "]") {
      if (d == 5 && t == "}" && under[4] == "routes") {     # a route of the network at depth 3
        if (rt["network"] == "0.0.0.0" && rt["netmask"] == "0.0.0.0") cur["default_gw"] = rt["gateway"]
        for (k in rt) delete rt[k]
      }
      if (d == 3 && t == "}") close_obj(under[2]); d--; continue
    }
    if (t !~ /^"/) continue
    k = t; sub(/^"/, "", k); sub(/".*/, "", k)
    if (t ~ /:$/) { pend = k; continue }           # a list or an object follows
    v = t; sub(/^"[^"]*"[ \t]*:[ \t]*/, "", v); gsub(/^"|"$/, "", v)
    if (d == 3) cur[k] = v
    if (d == 5) rt[k] = v
    if (want == "keys" && d == 2 && under[2] == "public_keys") { sub(/\\n$/, "", v); print v }
  }
  for (i = 1; i <= nets; i++) {
    m = mtu[link[i]]; if (m !~ /^[0-9]+$/) m = 1500
    if (mac[link[i]] == "") continue
    if (gw[i] != "") print mac[link[i]], addr[i], m, gw[i]; else print mac[link[i]], addr[i], m
  }
}
"""

FILES = {
    # tcpdump drops root for its own user, and refuses to run without it
    "etc/passwd": "root:x:0:0:root:/root:/usr/bin/dash\n"
                  "tcpdump:x:101:101:tcpdump:/nonexistent:/usr/sbin/nologin\n",
    "etc/group": "root:x:0:\ntcpdump:x:101:\n",
    "etc/shells": "/usr/bin/dash\n/bin/sh\n",
    "etc/profile": "export PATH=/usr/sbin:/usr/bin:/sbin:/bin\n",
    "etc/hostname": "vnetbench-guest\n",
    "etc/vnetbench/modules": "\n".join(m.split("kernel/", 1)[1] for m in MODULES) + "\n",
    "etc/vnetbench/udhcpc.script": UDHCPC_SCRIPT,
    "etc/vnetbench/cdjson.awk": CDJSON_AWK,
    "init": INIT.replace("VNETBENCH_READY", READY),
}
EXECUTABLE = ("init", "etc/vnetbench/udhcpc.script")

SYSLINUX_CFG = f"""DEFAULT vnetbench
TIMEOUT 1
PROMPT 0
LABEL vnetbench
  KERNEL /vmlinuz
  INITRD /initrd.img
  APPEND {CONSOLE} quiet panic=-1
"""
