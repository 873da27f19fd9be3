"""The outbound-safety connector: every outbound connection Lockgate makes goes through here.

Why: checking only the URL text lets a host *name* reach loopback, a private network or a
cloud metadata service (measured: a channel ``base_url`` whose name resolved to 127.0.0.1 got
the channel's key).  So the check has to happen where the connection is made:

1. the host is resolved once, through the reactor's pluggable name resolver
   (``IReactorPluggableNameResolver.nameResolver``; tests install their own answers);
2. *every* resolved address is checked against the SSRF policy
   (``gateway.channels.net_policy.check_address``) -- one refused address refuses the name;
3. the TCP connection goes to one of exactly those checked addresses (no second lookup, so a
   DNS answer that changes between check and connect -- rebinding -- cannot pass);
4. TLS, when wanted, wraps that connection with the *original* host name, so SNI and
   certificate verification are unchanged.

The verdict (the checked addresses, or the refusal) is cached per (host, policy) for a short
TTL on the injected clock: a relay opening connections to the same upstream all day resolves
it once per TTL, and pooled connections never reach the connector at all.  DNS failures are
not cached.  With a cached verdict of one address (the usual case) a connection is opened
without any coroutine, straight through that address's TCP endpoint (kept per address): under
a burst of stream starts most requests open a new upstream connection, and the two coroutine
layers, their Deferreds and an address parse per connection were most of what opening one
cost in Python (issue 22, goal 4).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable
from typing import Any

from twisted.internet.address import IPv4Address, IPv6Address
from twisted.internet.defer import Deferred, ensureDeferred
from twisted.internet.endpoints import TCP4ClientEndpoint, TCP6ClientEndpoint, wrapClientTLS
from twisted.internet.error import ConnectError, DNSLookupError
from twisted.internet.interfaces import (
    IHostResolution,
    IProtocol,
    IProtocolFactory,
    IResolutionReceiver,
    IStreamClientEndpoint,
)
from twisted.web.client import URI, Agent, BrowserLikePolicyForHTTPS
from twisted.web.iweb import IAgentEndpointFactory
from zope.interface import implementer

from gateway.channels.net_policy import (
    METADATA_HOSTS,
    PRIVATE_REFUSED,
    UnsafeUrl,
    UrlPolicy,
    check_address,
    literal_address,
)

#: protection off: every address passes (the connector still pins the resolved address)
OPEN_POLICY = UrlPolicy(protection_enabled=False)
#: how long a verdict (checked addresses or a refusal) is reused for one (host, policy)
VERDICT_TTL = 30.0


class AddressRefused(ConnectError):
    """The host (or an address it resolves to) is refused by the SSRF policy."""

    def __init__(self, host: str, reason: str) -> None:
        self.message = f"{host}: {reason}"
        super().__init__(string=self.message)
        self.host = host
        self.reason = reason

    def __str__(self) -> str:
        return self.message


@implementer(IResolutionReceiver)
class _Collector:
    """Gathers the addresses one ``resolveHostName`` call reports."""

    def __init__(self, host: str) -> None:
        self._host = host
        self.addresses: list[str] = []
        self.done: Deferred[list[str]] = Deferred()

    def resolutionBegan(self, resolutionInProgress: IHostResolution) -> None:
        pass

    def addressResolved(self, address: Any) -> None:
        if isinstance(address, IPv4Address | IPv6Address):
            self.addresses.append(address.host)

    def resolutionComplete(self) -> None:
        if self.done.called:  # cancelled while the lookup ran (e.g. a first-byte timeout)
            return
        if self.addresses:
            self.done.callback(self.addresses)
        else:
            self.done.errback(DNSLookupError(self._host))


def resolve(reactor: Any, host: str, port: int) -> Deferred[list[str]]:
    """Every address ``host`` resolves to now, via ``reactor.nameResolver``."""
    collector = _Collector(host)
    try:
        reactor.nameResolver.resolveHostName(collector, host, port)
    except Exception as exc:  # a resolver that refuses the name outright
        collector.done.errback(DNSLookupError(f"{host}: {exc}"))
    return collector.done


def _refusal(host: str, policy: UrlPolicy) -> str | None:
    """Why a host *name* is refused before any lookup, or None."""
    if not policy.protection_enabled:
        return None
    lowered = host.lower().rstrip(".")
    if lowered in METADATA_HOSTS:
        return "cloud metadata host is not allowed"
    local = lowered == "localhost" or lowered.endswith(".localhost")
    if local and not policy.allow_private and not policy.host_listed(lowered):
        return PRIVATE_REFUSED
    return None


class AddressVetter:
    """Resolves and checks hosts, caching each verdict per (host, policy) for ``ttl`` seconds."""

    #: a gateway talks to a handful of hosts; this only bounds a misconfiguration
    MAX_ENTRIES = 1024

    def __init__(self, reactor: Any, clock: Any = None, *, ttl: float = VERDICT_TTL) -> None:
        self._reactor = reactor
        self._clock = clock if clock is not None else reactor
        self._ttl = ttl
        self._verdicts: dict[tuple[str, UrlPolicy], tuple[float, list[str] | AddressRefused]] = {}
        #: resolutions made (tests assert the cache and the single lookup)
        self.lookups = 0

    def cached(self, host: str, policy: UrlPolicy) -> list[str] | AddressRefused | None:
        """The verdict on ``host`` still within its TTL, or None (``vet`` must decide)."""
        cached = self._verdicts.get((host, policy))
        if cached is not None and cached[0] > self._clock.seconds():
            return cached[1]
        return None

    def vet(self, host: str, port: int, policy: UrlPolicy) -> Deferred[list[str]]:
        """The checked addresses of ``host`` (fails with ``AddressRefused``/``DNSLookupError``)."""
        return ensureDeferred(self._vet(host, port, policy))

    async def _vet(self, host: str, port: int, policy: UrlPolicy) -> list[str]:
        key = (host, policy)
        now = self._clock.seconds()
        cached = self._verdicts.get(key)
        if cached is not None and cached[0] > now:
            verdict = cached[1]
        else:
            verdict = await self._decide(host, port, policy)
            if len(self._verdicts) >= self.MAX_ENTRIES:
                self._verdicts.clear()
            self._verdicts[key] = (self._clock.seconds() + self._ttl, verdict)
        if isinstance(verdict, AddressRefused):
            raise verdict
        return verdict

    async def _decide(self, host: str, port: int, policy: UrlPolicy) -> list[str] | AddressRefused:
        literal = literal_address(host)
        if literal is not None:
            addresses = [str(literal)]
        else:
            reason = _refusal(host, policy)
            if reason is not None:
                return AddressRefused(host, reason)
            self.lookups += 1
            addresses = await resolve(self._reactor, host, port)
        for address in addresses:
            try:
                check_address(host, address, policy)
            except UnsafeUrl as exc:
                return AddressRefused(host, f"resolves to {address}: {exc}")
        return addresses


@implementer(IStreamClientEndpoint)
class GuardedEndpoint:
    """TCP to ``host:port`` through the vetter: connects only to an address it checked."""

    #: TCP endpoints kept per checked address (a host has a few; this only bounds a DNS that
    #: answers a new address every time)
    MAX_ADDRESSES = 16

    def __init__(self, reactor: Any, vetter: AddressVetter, host: str, port: int,
                 policy: UrlPolicy, *, timeout: float = 10) -> None:
        self._reactor = reactor
        self._vetter = vetter
        self._host = host
        self._port = port
        self._policy = policy
        self._timeout = timeout
        self._endpoints: dict[str, IStreamClientEndpoint] = {}

    def connect(self, protocolFactory: IProtocolFactory) -> Deferred[IProtocol]:
        verdict = self._vetter.cached(self._host, self._policy)
        if type(verdict) is list and len(verdict) == 1:
            # checked within the TTL, one address: what ``_connect`` would do, minus its
            # coroutines (a refusal, a lookup or several addresses to try take that path)
            return self._tcp(verdict[0]).connect(protocolFactory)
        return ensureDeferred(self._connect(protocolFactory))

    async def _connect(self, factory: IProtocolFactory) -> IProtocol:
        addresses = await self._vetter.vet(self._host, self._port, self._policy)
        last: Exception | None = None
        for address in addresses:
            endpoint = self._tcp(address)
            try:
                protocol: IProtocol = await endpoint.connect(factory)
            except ConnectError as exc:  # try the next checked address
                last = exc
                continue
            return protocol
        assert last is not None
        raise last

    def _tcp(self, address: str) -> IStreamClientEndpoint:
        endpoint = self._endpoints.get(address)
        if endpoint is not None:
            return endpoint
        if isinstance(ipaddress.ip_address(address.split("%", 1)[0]), ipaddress.IPv6Address):
            endpoint = TCP6ClientEndpoint(self._reactor, address, self._port,
                                          timeout=self._timeout)
        else:
            endpoint = TCP4ClientEndpoint(self._reactor, address, self._port,
                                          timeout=self._timeout)
        if len(self._endpoints) >= self.MAX_ADDRESSES:
            self._endpoints.clear()
        self._endpoints[address] = endpoint
        return endpoint


@implementer(IAgentEndpointFactory)
class GuardedEndpointFactory:
    """``Agent.usingEndpointFactory`` plug: http over a ``GuardedEndpoint``, https wrapped in
    TLS for the URL's own host name.  ``policy`` is read when each endpoint is made."""

    def __init__(self, reactor: Any, policy: UrlPolicy | Callable[[], UrlPolicy] = OPEN_POLICY,
                 *, vetter: AddressVetter | None = None, tls_policy: Any = None,
                 connect_timeout: float = 10) -> None:
        self._reactor = reactor
        self._policy = policy
        self._vetter = vetter if vetter is not None else AddressVetter(reactor)
        self._tls_policy = tls_policy if tls_policy is not None else BrowserLikePolicyForHTTPS()
        self._timeout = connect_timeout

    def current_policy(self) -> UrlPolicy:
        return self._policy if isinstance(self._policy, UrlPolicy) else self._policy()

    def endpointForURI(self, uri: URI) -> IStreamClientEndpoint:
        return self.endpoint(uri.scheme, uri.host, uri.port, self.current_policy())

    def endpoint(self, scheme: bytes, host: bytes, port: int, policy: UrlPolicy
                 ) -> IStreamClientEndpoint:
        if scheme not in (b"http", b"https"):
            raise ValueError(f"unsupported upstream scheme {scheme!r}")
        name = host.decode("ascii").strip("[]")
        endpoint: IStreamClientEndpoint = GuardedEndpoint(
            self._reactor, self._vetter, name, port, policy, timeout=self._timeout)
        if scheme == b"https":
            endpoint = wrapClientTLS(self._tls_policy.creatorForNetloc(host, port), endpoint)
        return endpoint


class LivePolicy:
    """The SSRF policy of the live settings, numbered: the number changes when the policy does.

    The relay keys its connection pool by that number, so a connection checked under one
    policy is never reused under another.  Read on every relayed request, so while the settings
    are unchanged it costs one identity test.
    """

    KEYS = ("ssrf_protection_enabled", "ssrf_allow_private_networks", "ssrf_allowed_hosts")
    MAX_KNOWN = 64

    def __init__(self, settings: Any) -> None:
        self._settings = settings
        self._known: dict[tuple[str | None, ...], tuple[int, UrlPolicy]] = {}
        self._next = 1
        self._seen_values: object = None
        self._seen: tuple[int, UrlPolicy] = (0, OPEN_POLICY)

    def current(self) -> tuple[int, UrlPolicy]:
        settings = self._settings
        # ``Settings.replace`` swaps in a new dict on every change and never edits one in
        # place: while the dict is the same object, so is the policy (one identity test)
        values = getattr(settings, "_values", None)
        if values is not None and values is self._seen_values:
            return self._seen
        key = (settings.raw(self.KEYS[0]), settings.raw(self.KEYS[1]), settings.raw(self.KEYS[2]))
        known = self._known.get(key)
        if known is None:
            if len(self._known) >= self.MAX_KNOWN:
                self._known.clear()  # numbers keep counting up: an old one is never reused
            known = self._known[key] = (self._next, UrlPolicy.from_settings(settings))
            self._next += 1
        self._seen_values, self._seen = values, known
        return known


def settings_policy(settings: Any | None) -> Callable[[], UrlPolicy]:
    """The live settings' SSRF policy as a callable (``None``: protection off)."""
    if settings is None:
        return lambda: OPEN_POLICY
    live = LivePolicy(settings)
    return lambda: live.current()[1]


def guarded_agent(reactor: Any, settings: Any | None, *, connect_timeout: float,
                  clock: Any = None) -> Agent:
    """A non-persistent ``Agent`` whose every connection goes through the connector under the
    SSRF policy of ``settings`` at connect time (for the console's occasional calls)."""
    factory = GuardedEndpointFactory(reactor, settings_policy(settings),
                                     vetter=AddressVetter(reactor, clock),
                                     connect_timeout=connect_timeout)
    return Agent.usingEndpointFactory(reactor, factory)


def refusal_of(failure_value: BaseException) -> AddressRefused | None:
    """The ``AddressRefused`` behind a connect failure (Agent failures may wrap it)."""
    if isinstance(failure_value, AddressRefused):
        return failure_value
    for reason in getattr(failure_value, "reasons", None) or ():
        found = refusal_of(reason.value)
        if found is not None:
            return found
    return None
