"""Which upstream URLs Lockgate may call: the SSRF policy for channel base URLs.

An admin (or an imported backup) sets an upstream ``base_url``; without a policy that URL could
point Lockgate at a cloud metadata service or an internal admin port and relay the answer back.
Validation here looks only at what the URL itself says -- the scheme, userinfo, fragment, a
literal IP address or a well-known metadata host name.  It does NOT resolve names: DNS can change
between validation and use, so every connection re-checks the resolved addresses at connect
time with ``check_address`` (``gateway.channels.safe_connect``).

Rules (gateway contract §6.3, settings ``ssrf_protection_enabled``,
``ssrf_allow_private_networks``, ``ssrf_allowed_hosts``):

- always: http or https only, a host, no userinfo (``user:pass@``), no fragment, no whitespace,
  no percent-encoded host; a non-ASCII host is replaced by its IDNA (ASCII) form, so
  ``127。0。0。1`` is judged -- and stored -- as ``127.0.0.1``;
- with protection on (the default): link-local addresses (169.254.0.0/16, fe80::/10), cloud
  metadata endpoints (169.254.169.254, fd00:ec2::254, metadata.google.internal, ...),
  unspecified, multicast and reserved addresses are refused -- even for hosts on the allow
  list, because no legitimate upstream lives there;
- private, loopback and shared (CGNAT) ranges and ``localhost`` are refused unless
  ``ssrf_allow_private_networks`` is on or the host matches ``ssrf_allowed_hosts``;
- a host *name* that spells out an address wildcard-DNS style (``10.0.0.1.nip.io``,
  ``169-254-169-254.sslip.io``) is judged by that address;
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
from urllib.parse import urlsplit, urlunsplit

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
#: public wildcard-DNS services: ``<address in some spelling>.<suffix>`` resolves to the address
WILDCARD_DNS_SUFFIXES = (".nip.io", ".sslip.io", ".xip.io", ".nip.direct", ".traefik.me")
_SHARED = ipaddress.ip_network("100.64.0.0/10")
_NUMERIC_HOST = re.compile(r"^[0-9a-fx.]+$")
_EMBEDDED_V4 = re.compile(r"(?<![0-9])([0-9]{1,3})[.-]([0-9]{1,3})[.-]([0-9]{1,3})[.-]"
                          r"([0-9]{1,3})(?![0-9])")
_EMBEDDED_HEX = re.compile(r"(?:^|[.-])([0-9a-f]{8})(?=[.-])")


#: the refusal of a private address names the settings that would allow it
PRIVATE_REFUSED = ("private or loopback address is not allowed (allowed by the settings "
                   "ssrf_allow_private_networks or ssrf_allowed_hosts)")


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
    if not host.isascii() or "%" in host:
        text = plain_host_url(text)
        host = (urlsplit(text).hostname or "").rstrip(".")
    if not policy.protection_enabled:
        return text
    address = literal_address(host)
    if address is None:
        if host in METADATA_HOSTS:
            raise UnsafeUrl("cloud metadata host is not allowed")
        local = host == "localhost" or host.endswith(".localhost")
        if local and not policy.allow_private and not policy.host_listed(host):
            raise UnsafeUrl(PRIVATE_REFUSED)
        for embedded in embedded_addresses(host):
            try:
                check_address(host, embedded, policy)
            except UnsafeUrl as exc:
                raise UnsafeUrl(f"host name embeds {embedded}: {exc}") from None
        return text
    check_address(host, address, policy)
    return text


def plain_host_url(url: str) -> str:
    """``url`` with its host in plain ASCII form: a non-ASCII host (IDNA dots included) is
    replaced by its IDNA form, a percent-encoded host is refused (UnsafeUrl).  Policy-free, for
    every stored outbound URL (the settings' URL fields too); a URL with no parsable host is
    returned unchanged for the caller's own checks."""
    try:
        parts = urlsplit(url.strip())
        host = (parts.hostname or "").rstrip(".")
        port = parts.port
    except ValueError:
        return url
    if "%" in host and ":" not in host:
        raise UnsafeUrl("URL host must not be percent-encoded")
    if host.isascii():
        return url
    host = ascii_host(host)
    userinfo = parts.netloc.rpartition("@")[0]
    netloc = (f"{userinfo}@" if userinfo else "") + (host if port is None else f"{host}:{port}")
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


def ascii_host(host: str) -> str:
    """The ASCII (IDNA) form of a non-ASCII host name.

    Resolvers treat the ideographic and full-width dots (U+3002, U+FF0E, U+FF61) as label
    separators, so ``127。0。0。1`` *is* ``127.0.0.1``: the policy has to see the ASCII form.
    """
    try:
        return host.encode("idna").decode("ascii").lower()
    except UnicodeError:
        raise UnsafeUrl("URL host is not a valid host name") from None


def embedded_addresses(host: str) -> list[Address]:
    """IPv4 addresses written into a host name, as wildcard-DNS services answer them
    (``169.254.169.254.nip.io``, ``10-0-0-1.sslip.io``, ``app-7f000001.nip.io``)."""
    found: list[Address] = []
    for match in _EMBEDDED_V4.finditer(host):
        try:
            found.append(ipaddress.IPv4Address(".".join(match.groups())))
        except ValueError:
            continue
    if host.endswith(WILDCARD_DNS_SUFFIXES):
        for match in _EMBEDDED_HEX.finditer(host):
            found.append(ipaddress.IPv4Address(int(match.group(1), 16)))
    return found


def header_safe(text: str) -> bool:
    """Printable ASCII only: a value every HTTP stack sends and parses the same way (upstream
    keys go into ``Authorization``; NUL or non-ASCII there breaks the request)."""
    return all(32 <= ord(ch) < 127 for ch in text)
