"""Which upstream URLs Lockgate may call: the SSRF policy for channel base URLs.

An admin (or an imported backup) sets an upstream ``base_url``; without a policy that URL could
point Lockgate at a cloud metadata service or an internal admin port and relay the answer back.
Validation here looks only at what the URL itself says -- the scheme, userinfo, fragment, a
literal IP address or a well-known metadata host name.  It does NOT resolve names: DNS can change
between validation and use, so the relay re-checks the resolved address at connect time with
``check_address``.

Rules (gateway contract §6.3, settings ``ssrf_protection_enabled``,
``ssrf_allow_private_networks``, ``ssrf_allowed_hosts``):

- always: http or https only, a host, no userinfo (``user:pass@``), no fragment, no whitespace;
- with protection on (the default): link-local addresses (169.254.0.0/16, fe80::/10), cloud
  metadata endpoints (169.254.169.254, fd00:ec2::254, metadata.google.internal, ...),
  unspecified, multicast and reserved addresses are refused -- even for hosts on the allow
  list, because no legitimate upstream lives there;
- private, loopback and shared (CGNAT) ranges and ``localhost`` are refused unless
  ``ssrf_allow_private_networks`` is on or the host matches ``ssrf_allowed_hosts``;
- with protection off every http(s) URL passes.

Pure: no I/O.
"""

from __future__ import annotations

import ipaddress
import re
import socket
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network

METADATA_HOSTS = frozenset({
    "metadata.google.internal",
    "metadata.goog",
    "metadata",
    "instance-data",
    "instance-data.ec2.internal",
    "metadata.azure.internal",
})
METADATA_ADDRESSES = frozenset({
    ipaddress.ip_address("169.254.169.254"),
    ipaddress.ip_address("169.254.170.2"),
    ipaddress.ip_address("100.100.100.200"),
    ipaddress.ip_address("fd00:ec2::254"),
})
_SHARED = ipaddress.ip_network("100.64.0.0/10")
_NUMERIC_HOST = re.compile(r"^[0-9a-fx.]+$")


#: the refusal of a private address says which settings allow one (a newcomer's first local
#: upstream is refused by default and the message is all they see)
PRIVATE_REFUSED = ("private or loopback address is not allowed (to allow it set "
                   "ssrf_allow_private_networks to true, or list the host in ssrf_allowed_hosts, "
                   "with PUT /api/settings)")


class UnsafeUrl(ValueError):
    """The URL may not be used as an upstream; the message says why."""


@dataclass(frozen=True)
class UrlPolicy:
    protection_enabled: bool = True
    allow_private: bool = False
    #: exact host names, ``*.suffix`` / ``.suffix`` wildcards (lower case)
    allowed_names: frozenset[str] = frozenset()
    allowed_networks: tuple[Network, ...] = field(default_factory=tuple)

    @classmethod
    def from_entries(cls, *, protection_enabled: bool = True, allow_private: bool = False,
                     allowed_hosts: Iterable[str] = ()) -> UrlPolicy:
        names: set[str] = set()
        networks: list[Network] = []
        for raw in allowed_hosts:
            entry = raw.strip().lower().rstrip(".")
            if not entry:
                continue
            try:
                networks.append(ipaddress.ip_network(entry.strip("[]"), strict=False))
            except ValueError:
                names.add(entry)
        return cls(protection_enabled, allow_private, frozenset(names), tuple(networks))

    @classmethod
    def from_settings(cls, settings: Any) -> UrlPolicy:
        """Build from a ``gateway.settings.store.Settings`` snapshot."""
        hosts = settings.text("ssrf_allowed_hosts").replace(",", " ").split()
        return cls.from_entries(
            protection_enabled=settings.flag("ssrf_protection_enabled"),
            allow_private=settings.flag("ssrf_allow_private_networks"),
            allowed_hosts=hosts,
        )

    def host_listed(self, host: str, address: Address | None = None) -> bool:
        if address is not None and any(address in net for net in self.allowed_networks):
            return True
        for name in self.allowed_names:
            if name.startswith("*.") or name.startswith("."):
                suffix = name.lstrip("*")
                if host.endswith(suffix) and len(host) > len(suffix):
                    return True
            elif host == name:
                return True
        return False


def literal_address(host: str) -> Address | None:
    """The IP a host string denotes by itself (incl. forms like ``127.1`` or ``0x7f000001``
    that C resolvers accept), or None for a name."""
    text = host.strip("[]")
    try:
        address = ipaddress.ip_address(text.split("%", 1)[0])
    except ValueError:
        if not _NUMERIC_HOST.match(text):
            return None
        try:
            address = ipaddress.IPv4Address(socket.inet_aton(text))
        except OSError:
            return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped:
        return address.ipv4_mapped
    return address


def _always_blocked(address: Address) -> str | None:
    if address in METADATA_ADDRESSES:
        return "cloud metadata address"
    if address.is_link_local:
        return "link-local address"
    if address.is_unspecified or address.is_multicast or (
            address.is_reserved and not address.is_loopback):
        return "non-routable address"
    return None


def _is_private(address: Address) -> bool:
    return bool(address.is_private or address.is_loopback or address in _SHARED)


def check_address(host: str, address: str | Address, policy: UrlPolicy) -> None:
    """Connect-time check of a resolved address for ``host``; raises UnsafeUrl."""
    if not policy.protection_enabled:
        return
    ip = literal_address(str(address)) if isinstance(address, str) else address
    if ip is None:
        raise UnsafeUrl("not an IP address")
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped:
        ip = ip.ipv4_mapped
    reason = _always_blocked(ip)
    if reason:
        raise UnsafeUrl(f"{reason} is not allowed")
    if _is_private(ip) and not policy.allow_private and not policy.host_listed(host.lower(), ip):
        raise UnsafeUrl(PRIVATE_REFUSED)


def check_url(url: str, policy: UrlPolicy) -> str:
    """Validate an upstream base URL; returns it stripped, raises UnsafeUrl."""
    text = url.strip()
    if not text:
        raise UnsafeUrl("URL is empty")
    if any(ch.isspace() or ord(ch) < 32 or ord(ch) == 127 for ch in text):
        raise UnsafeUrl("URL contains whitespace or control characters")
    try:
        parts = urlsplit(text)
        port = parts.port
    except ValueError:
        raise UnsafeUrl("URL is malformed") from None
    if parts.scheme.lower() not in ("http", "https"):
        raise UnsafeUrl("URL must use http or https")
    if "#" in text:
        raise UnsafeUrl("URL must not have a fragment")
    if "@" in parts.netloc:
        raise UnsafeUrl("URL must not contain credentials")
    host = (parts.hostname or "").rstrip(".")
    if not host:
        raise UnsafeUrl("URL has no host")
    if port == 0:
        raise UnsafeUrl("URL port is invalid")
    if not policy.protection_enabled:
        return text
    address = literal_address(host)
    if address is None:
        if host in METADATA_HOSTS:
            raise UnsafeUrl("cloud metadata host is not allowed")
        local = host == "localhost" or host.endswith(".localhost")
        if local and not policy.allow_private and not policy.host_listed(host):
            raise UnsafeUrl(PRIVATE_REFUSED)
        return text
    check_address(host, address, policy)
    return text
