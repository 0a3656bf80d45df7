"""Whether a URL's host is this machine: loopback, one of this machine's names, or an address
those names resolve to. Only local resolution, each lookup bounded: a hung resolver must not
hold the gate up, and a host that cannot be placed in time counts as another machine."""

from __future__ import annotations

import functools
import ipaddress
import socket
import threading
from urllib.parse import urlsplit

RESOLVE_S = 1.0  # per lookup


@functools.cache  # a name that resolves slowly is asked once, not once per file that names it
def is_local(host: str) -> bool:
    """True when `host` (a name or an address, as a URL gives it) is this machine."""
    host = host.strip().strip("[]").rstrip(".").lower()
    if not host or host == "localhost" or host.endswith(".localhost"):
        return True
    names, addresses = _own()
    address = _address(host)
    if address is not None:
        return (address.is_loopback or address.is_unspecified or address in addresses
                or _routes_to_itself(address))
    if host in names:
        return True
    found = _resolve(host)
    return any(a.is_loopback or a in addresses for a in found)


def host_of(url: str | None) -> str:
    """The host part of a URL; "" when there is none (a launched server is on this machine)."""
    return (urlsplit(url).hostname or "") if url else ""


def server_of(url: str | None) -> str:
    """The server a URL reaches, as "host:port" (the scheme's port where none is given,
    localhost as 127.0.0.1): two routes or names of one server read alike. "" without a host."""
    if not url:
        return ""
    parts = urlsplit(url)
    host = (parts.hostname or "").rstrip(".").lower()
    if not host:
        return ""
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:  # a port that is no number: the URL's own text tells servers apart
        return parts.netloc.lower()
    host = "127.0.0.1" if host == "localhost" else host
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def shared_servers(urls: dict[str, str]) -> dict[str, list[str]]:
    """Servers that more than one name reaches: {"host:port": [names]}, from {name: URL}."""
    found: dict[str, list[str]] = {}
    for name, url in urls.items():
        server = server_of(url)
        if server:
            found.setdefault(server, []).append(name)
    return {server: names for server, names in found.items() if len(names) > 1}


def shared_line(server: str, names: list[str]) -> str:
    """The words a run's header and reports say of entries that reach one server."""
    return (f"{', '.join(names)} reach one server, {server}: checked as one (in one worker "
            "under xdist, one measurement at a time)")


def _address(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        address = ipaddress.ip_address(host.split("%")[0])  # fe80::1%eth0: the zone is no part
    except ValueError:
        return None
    mapped = getattr(address, "ipv4_mapped", None)  # ::ffff:127.0.0.1 is 127.0.0.1
    return mapped or address


@functools.cache
def _own() -> tuple[frozenset[str], frozenset]:
    """This machine's names and the addresses they (and its outbound route) resolve to."""
    name = socket.gethostname().lower()
    fqdn = (_bounded(socket.getfqdn, name) or name).lower()
    names = {name, fqdn, name.split(".")[0]}
    addresses = set()
    for n in names:
        addresses |= _resolve(n)
    addresses |= _outbound()
    return frozenset(names), frozenset(addresses)


def _resolve(host: str) -> set:
    infos = _bounded(socket.getaddrinfo, host, None) or []
    found = (_address(info[4][0]) for info in infos)
    return {a for a in found if a is not None}


def _outbound() -> set:
    """The addresses this machine sends from: a UDP socket's connect picks a route and sends
    nothing, so a machine whose name resolves only to 127.0.1.1 still knows its LAN address."""
    found = set()
    for family, probe in ((socket.AF_INET, "10.255.255.255"), (socket.AF_INET6, "fd00::1")):
        try:
            with socket.socket(family, socket.SOCK_DGRAM) as s:
                s.connect((probe, 9))
                found.add(_address(s.getsockname()[0]))
        except OSError:
            continue  # no route of that family
    return {a for a in found if a is not None}


def _routes_to_itself(address) -> bool:
    """Whether `address` is one of this machine's own, of any interface: a UDP socket connected
    to it takes it as its source (the kernel routes it through the loopback). Nothing is sent."""
    family = socket.AF_INET6 if address.version == 6 else socket.AF_INET
    try:
        with socket.socket(family, socket.SOCK_DGRAM) as s:
            s.connect((str(address), 9))
            return _address(s.getsockname()[0]) == address
    except OSError:  # no route: not this machine
        return False


def _bounded(fn, *args):
    """fn(*args), or None when it raises or takes longer than RESOLVE_S (the thread is left to
    finish on its own: a resolver call cannot be cancelled)."""
    out: list = []

    def run() -> None:
        try:
            out.append(fn(*args))
        except (OSError, UnicodeError):
            pass

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(RESOLVE_S)
    return out[0] if out else None
