"""An all-in-one cloud's release file (src/vnetbench/aio/releases/NAME.yaml), checked.

Why one file per release: the root's Debian suite, mirror policy and the pinned version of
every package it installs are in one place, and the cached root is keyed by that file's
hash (``key``), so editing a version can never be served a root built from the old set.
Every field is checked before anything is built; a problem is one line naming the field
and the fix.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

import yaml

from vnetbench.errors import VnetbenchError
from vnetbench.inputs import excerpt

RELEASES = Path(__file__).resolve().parent / "releases"
DEFAULT_MIRROR = "http://deb.debian.org/debian"
NAME_RE = re.compile(r"^[a-z][a-z0-9]{1,19}\Z")
PACKAGE_RE = re.compile(r"^[a-z0-9][a-z0-9+.-]{1,62}\Z")              # Debian policy 5.6.1
VERSION_RE = re.compile(r"^(?:[0-9]{1,5}:)?[0-9][A-Za-z0-9.+~-]{0,99}\Z")   # policy 5.6.12
SUITE_RE = re.compile(r"^[a-z][a-z0-9-]{1,29}\Z")
URL_RE = re.compile(r"^https?://[A-Za-z0-9.-]+(?::[0-9]{1,5})?(?:/[A-Za-z0-9._~%/-]*)?\Z")
MAX_BYTES = 64 * 1024
FIELDS = {"release", "openstack", "debian", "mirror", "disk_gb", "packages"}


@dataclass(frozen=True)
class Release:
    name: str
    openstack: str
    suite: str
    variant: str
    components: tuple[str, ...]
    mirror: str               # "host" or a URL
    disk_bytes: int
    packages: dict            # name -> pinned version
    key: str                  # the file's hash: the cache key

    def pins(self) -> list[str]:
        """apt-get's arguments: every package at its pinned version."""
        return [f"{name}={version}" for name, version in sorted(self.packages.items())]


def names() -> list[str]:
    return sorted(p.stem for p in RELEASES.glob("*.yaml"))


def load(name: str) -> Release:
    """The release NAME (--release), from its file; one line naming the problem otherwise."""
    known = names()
    if not isinstance(name, str) or not NAME_RE.match(name) or name not in known:
        raise VnetbenchError(f"--release {excerpt(str(name))}: unknown release; use one of: "
                             f"{', '.join(known)} (files in {RELEASES})")
    return load_file(RELEASES / f"{name}.yaml", name)


def load_file(path: Path, name: str) -> Release:
    """PATH checked as the release file of NAME."""
    def bad(field: str, problem: str):
        return VnetbenchError(f"{path}: {field} {problem}; fix the release file")
    try:
        data = path.read_bytes()[:MAX_BYTES + 1]
    except OSError as exc:
        raise VnetbenchError(f"{path}: cannot read ({exc.strerror}); restore the release file") from None
    if len(data) > MAX_BYTES:
        raise bad("the file", f"is larger than {MAX_BYTES} bytes")
    try:
        doc = yaml.safe_load(data.decode("utf-8"))
    except (UnicodeDecodeError, yaml.YAMLError) as exc:
        raise bad("the file", f"is not YAML ({excerpt(str(exc).splitlines()[0])})") from None
    if not isinstance(doc, dict):
        raise bad("the file", "is not a mapping")
    if unknown := sorted(map(str, set(doc) - FIELDS)):
        raise bad(excerpt(unknown[0]), f"is not a field (fields: {', '.join(sorted(FIELDS))})")
    if doc.get("release") != name:
        raise bad("release", f"is {excerpt(str(doc.get('release')))}, not the file's name {name!r}")
    suite, variant, components = _debian(doc, bad)
    return Release(name=name, openstack=_text(doc, "openstack", re.compile(r"^20[0-9]{2}\.[12]\Z"), bad),
                   suite=suite, variant=variant, components=components,
                   mirror=_mirror(doc.get("mirror"), bad),
                   disk_bytes=_disk(doc.get("disk_gb"), bad), packages=_packages(doc, bad),
                   key=hashlib.sha256(data).hexdigest()[:12])


def _text(doc: dict, field: str, pattern, bad) -> str:
    value = doc.get(field)
    if not isinstance(value, str) or not pattern.match(value):
        raise bad(field, f"is {excerpt(repr(value))}; expected something like '2025.1'")
    return value


def _debian(doc: dict, bad) -> tuple[str, str, tuple[str, ...]]:
    deb = doc.get("debian")
    if not isinstance(deb, dict) or set(deb) != {"suite", "variant", "components"}:
        raise bad("debian", "must be a mapping of exactly suite, variant and components")
    suite, variant, comps = deb["suite"], deb["variant"], deb["components"]
    if not isinstance(suite, str) or not SUITE_RE.match(suite):
        raise bad("debian.suite", f"is {excerpt(repr(suite))}; expected a suite name like trixie")
    if variant not in ("minbase", "buildd"):
        raise bad("debian.variant", f"is {excerpt(repr(variant))}; use minbase (or buildd)")
    if (not isinstance(comps, list) or not comps or len(comps) > 4
            or not all(c in ("main", "contrib", "non-free", "non-free-firmware") for c in comps)):
        raise bad("debian.components", f"is {excerpt(repr(comps))}; expected a list like [main]")
    return suite, variant, tuple(comps)


def _mirror(value, bad) -> str:
    if value == "host" or (isinstance(value, str) and URL_RE.match(value)):
        return value
    raise bad("mirror", f"is {excerpt(repr(value))}; use host or an http(s) URL of a Debian mirror")


def _disk(value, bad) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.5 <= value <= 100:
        raise bad("disk_gb", f"is {excerpt(repr(value))}; expected the GB the root needs (0.5-100)")
    return int(value * 1e9)


def _packages(doc: dict, bad) -> dict:
    pkgs = doc.get("packages")
    if not isinstance(pkgs, dict) or not 1 <= len(pkgs) <= 500:
        raise bad("packages", "must map 1-500 package names to their pinned versions")
    for name, version in pkgs.items():
        if not isinstance(name, str) or not PACKAGE_RE.match(name):
            raise bad("packages", f"has {excerpt(repr(name))}, not a Debian package name")
        if not isinstance(version, str) or not VERSION_RE.match(version):
            raise bad(f"packages.{name}", f"is {excerpt(repr(version))}, not a Debian version "
                      "(quote it: \"2:26.0.3-0+deb13u3\")")
    return dict(pkgs)


def host_mirror(sources=(Path("/etc/apt/sources.list"), Path("/etc/apt/sources.list.d"))) -> str:
    """The Debian archive the machine's apt uses (the first deb URI ending in /debian of
    its sources, one-line or deb822), else the default: the root comes from the same
    registry as the host's packages."""
    files = []
    for src in sources:
        files += sorted(src.glob("*.list")) + sorted(src.glob("*.sources")) if src.is_dir() else [src]
    for f in files:
        try:
            text = f.read_text(errors="replace")
        except OSError:
            continue
        for uri in _deb_uris(text):
            if URL_RE.match(uri) and uri.rstrip("/").endswith("/debian"):
                return uri.rstrip("/")
    return DEFAULT_MIRROR


def _deb_uris(text: str) -> list[str]:
    """The URIs of binary (deb) entries of a sources file, either format."""
    out = []
    for stanza in re.split(r"\n[ \t]*\n", text):
        fields = {}
        for line in stanza.splitlines():
            words = line.split("#", 1)[0].split()
            if words and words[0] == "deb":            # one-line format
                out += [w for w in words[1:] if "://" in w][:1]
            elif words and words[0].endswith(":"):     # deb822
                fields[words[0]] = words[1:]
        if "deb" in fields.get("Types:", []):
            out += fields.get("URIs:", [])
    return out


def mirror_of(release: Release) -> str:
    return host_mirror() if release.mirror == "host" else release.mirror.rstrip("/")
