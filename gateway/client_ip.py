"""The client's IP: the socket peer, or X-Forwarded-For only when the peer is a trusted proxy.

The origin trusted forwarded headers from anyone, which made IP allow-lists and per-IP limits
spoofable (console contract §7.1).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable

from twisted.web.iweb import IRequest

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def parse_networks(entries: Iterable[str]) -> list[Network]:
    """Parse IPs/CIDRs; raises ValueError naming the bad entry."""
    networks: list[Network] = []
    for entry in entries:
        text = entry.strip()
        if not text:
            continue
        try:
            networks.append(ipaddress.ip_network(text, strict=False))
        except ValueError:
            raise ValueError(f"{text!r} is not an IP address or CIDR range") from None
    return networks


def ip_in(ip: str, networks: Iterable[Network]) -> bool:
    try:
        address = ipaddress.ip_address(ip)
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped:
        address = address.ipv4_mapped
    return any(address in network for network in networks)


class ClientAddress:
    """Resolves a request's client IP given the configured trusted proxies."""

    def __init__(self, trusted_proxies: Iterable[Network] = ()) -> None:
        self._trusted = list(trusted_proxies)

    def of(self, request: IRequest) -> str:
        peer = request.getClientAddress()
        ip = getattr(peer, "host", "") or ""
        if not self._trusted or not ip_in(ip, self._trusted):
            return ip
        forwarded = request.getHeader(b"x-forwarded-for")
        if not forwarded:
            return ip
        # walk from the nearest hop outwards, skipping our own proxies
        hops = [hop.strip() for hop in forwarded.decode("latin-1").split(",") if hop.strip()]
        for hop in reversed(hops):
            if not ip_in(hop, self._trusted):
                return hop
        return hops[0] if hops else ip
