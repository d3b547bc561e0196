"""The guest reads an OpenStack config drive with busybox awk (recipe.CDJSON_AWK): the
address, netmask and MTU of each IPv4 network by the link's MAC, and the public keys.
Recorded from a Zed Nova config drive of the AIO (tests/data/configdrive/; admin_pass and
random_seed redacted)."""

import shutil
import subprocess
from pathlib import Path

from vnetbench.image import recipe

DATA = Path(__file__).parent.parent / "data" / "configdrive"
BUSYBOX = "busybox"     # busybox-static, a Debian package make installs: missing fails, never skips


def _awk(tmp_path, want, doc: Path) -> list[str]:
    prog = tmp_path / "cdjson.awk"
    prog.write_text(recipe.CDJSON_AWK)
    assert shutil.which(BUSYBOX), "busybox not found: install busybox-static ('make install')"
    out = subprocess.run([BUSYBOX, "awk", "-v", f"want={want}", "-f", str(prog), str(doc)],
                         capture_output=True, text=True, check=True).stdout
    return out.splitlines()


def test_network_data_gives_mac_address_mtu(tmp_path):
    rows = _awk(tmp_path, "nics", DATA / "network_data.json")
    assert rows == [" ".join(map(str, nic)) for nic in recorded_nics()]


def recorded_nics():
    import json
    doc = json.loads((DATA / "network_data.json").read_text())
    links = {l["id"]: l for l in doc["links"]}
    def gateway(n):
        return [r["gateway"] for r in n.get("routes", []) if r["network"] == "0.0.0.0"][:1]
    return [(links[n["link"]]["ethernet_mac_address"], f"{n['ip_address']}/{n['netmask']}",
             links[n["link"]].get("mtu") or 1500, *gateway(n))
            for n in doc["networks"] if n["type"] == "ipv4"]


def test_several_links_and_nested_routes(tmp_path):
    doc = tmp_path / "nd.json"
    doc.write_text('{"links": [{"id": "t1", "mtu": 1450, "ethernet_mac_address": "fa:16:3e:00:00:01"},'
                   ' {"id": "t2", "mtu": null, "ethernet_mac_address": "fa:16:3e:00:00:02"}],'
                   ' "networks": [{"id": "n0", "type": "ipv4", "link": "t1", "ip_address": "198.19.1.5",'
                   ' "netmask": "255.255.255.0", "routes": [{"network": "0.0.0.0", "netmask": "0.0.0.0",'
                   ' "gateway": "198.19.1.1"}]}, {"id": "n1", "type": "ipv4_dhcp", "link": "t2"},'
                   ' {"id": "n2", "type": "ipv4", "link": "t2", "ip_address": "198.18.3.3",'
                   ' "netmask": "255.255.0.0", "routes": []}], "services": []}')
    # the default route's gateway where the subnet has one (a router's interface)
    assert _awk(tmp_path, "nics", doc) == ["fa:16:3e:00:00:01 198.19.1.5/255.255.255.0 1450 198.19.1.1",
                                           "fa:16:3e:00:00:02 198.18.3.3/255.255.0.0 1500"]


def test_meta_data_gives_the_public_keys(tmp_path):
    import json
    keys = json.loads((DATA / "meta_data.json").read_text())["public_keys"]
    # Nova keeps the key's trailing newline (as a JSON escape); the guest drops it
    assert _awk(tmp_path, "keys", DATA / "meta_data.json") == [k.strip() for k in keys.values()]
