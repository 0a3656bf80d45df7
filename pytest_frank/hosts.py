"""Whether a host a fleet names is this machine: its files and its GPU can be read here only then.

No packet is sent: a UDP socket "connected" to one of this machine's own addresses takes that
address as its source (the kernel routes it through the loopback), and a connect sends nothing."""

from __future__ import annotations

import functools
import ipaddress
import socket


@functools.cache
def is_local(host: str | None) -> bool:
    host = (host or "").strip("[]").lower()
    if not host or host == "localhost":
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        if host in {socket.gethostname().lower(), socket.getfqdn().lower()}:
            return True
        return any(_own(a) for a in _resolve(host))
    return address.is_loopback or address.is_unspecified or _own(str(address))


def _resolve(name: str) -> set[str]:
    try:
        return {info[4][0] for info in socket.getaddrinfo(name, None, type=socket.SOCK_DGRAM)}
    except (OSError, UnicodeError):
        return set()


def _own(address: str) -> bool:
    ip = ipaddress.ip_address(address.split("%")[0])
    if ip.is_loopback:
        return True
    family = socket.AF_INET6 if ip.version == 6 else socket.AF_INET
    try:
        with socket.socket(family, socket.SOCK_DGRAM) as probe:
            probe.connect((str(ip), 9))
            return probe.getsockname()[0] == str(ip)
    except OSError:  # no route: not an address of this machine
        return False
