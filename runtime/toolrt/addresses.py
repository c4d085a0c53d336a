"""Whether a host name or address is inside this machine or its network rather than the internet.

Shared by `webfetch` (which asks before fetching such a URL) and the sandbox's network proxy (which
refuses to connect to one unless the host named it): loopback, private ranges, link-local (cloud
metadata services), CGNAT, multicast, and names that only resolve locally, with an address accepted in
every spelling the kernel accepts (`127.1`, `0x7f.1`, `2130706433`, IPv4 inside IPv6).
"""

from __future__ import annotations

import ipaddress
import socket

__all__ = ["address_forms", "ip_literal", "private_address"]

_LOCAL_NAMES = ("localhost", ".localhost", ".local", ".internal", ".lan", ".home.arpa")


def private_address(host: str) -> bool:
    """Whether `host` (a name or an address) is inside this machine or its network, not the internet:
    loopback, private ranges, link-local (cloud metadata services), CGNAT, multicast, or names that only
    resolve locally."""
    name = host.strip("[]").rstrip(".").lower()
    if name == "localhost" or name.endswith(_LOCAL_NAMES):
        return True
    address = ip_literal(name)
    if address is None:
        return False
    if isinstance(address, ipaddress.IPv6Address):
        embedded = _embedded_ipv4(address)
        if embedded is not None:
            return not embedded.is_global or embedded.is_multicast
    return not address.is_global or address.is_multicast


_NAT64 = (ipaddress.IPv6Network("64:ff9b::/96"), ipaddress.IPv6Network("64:ff9b:1::/48"))
_NUMERIC = frozenset("0123456789abcdefx.")


def ip_literal(name: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """`name` as an address, in every IPv4 spelling `inet_aton` accepts (`127.1`, `0x7f.1`, `2130706433`,
    `0177.0.0.1`), which resolvers and HTTP clients pass to the kernel as that address."""
    try:
        return ipaddress.ip_address(name)
    except ValueError:
        pass
    if not name or not set(name) <= _NUMERIC or not name[0].isdigit():
        return None
    try:
        return ipaddress.IPv4Address(socket.inet_aton(name))
    except OSError:
        return None


def address_forms(host: str) -> frozenset[str]:
    """Every canonical spelling of the address the kernel connects `host` to: the address itself and, for
    an IPv6 one carrying an IPv4 address (mapped, NAT64, 6to4, Teredo), that IPv4 address; `host` alone
    for a name."""
    address = ip_literal(host.strip("[]").split("%")[0])
    if address is None:
        return frozenset({host})
    forms = {str(address)}
    if isinstance(address, ipaddress.IPv6Address):
        embedded = _embedded_ipv4(address)
        if embedded is not None:
            forms.add(str(embedded))
    return frozenset(forms)


def _embedded_ipv4(address: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 one carries: IPv4-mapped, NAT64 (well-known and local prefixes), 6to4,
    or a Teredo client; None for a plain IPv6 address."""
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if any(address in network for network in _NAT64):
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    if address.sixtofour is not None:
        return address.sixtofour
    if address.teredo is not None:
        return address.teredo[1]
    return None
