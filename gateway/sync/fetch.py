"""One bounded server-side HTTP request for sync and health checks (not on the relay path).

Model/price sync, status monitors and channel probes each make an occasional request to an
admin-configured URL.  They share the same needs: a fresh ``Agent`` on the injected reactor
(no connection kept: these calls are rare), one deadline on the injected clock covering connect,
headers *and* body, a cap on how much body is read, and errors as one exception type with a
short message that is safe to show an admin.

The URL policy (SSRF guard): callers run ``gateway.net_policy.check_url`` on the URL first
(scheme, literal addresses, metadata names).  Given the ``policy`` as well, ``fetch`` resolves
the host itself, checks the *resolved* address with ``check_address`` and connects to exactly
that address (TLS still verifies the original host name), so a name that resolves to a private
or metadata address -- or changes its answer between check and connect -- is refused.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from twisted.internet.defer import CancelledError, Deferred
from twisted.internet.endpoints import HostnameEndpoint, wrapClientTLS
from twisted.internet.interfaces import IStreamClientEndpoint
from twisted.python.failure import Failure
from twisted.web.client import URI, Agent, BrowserLikePolicyForHTTPS
from twisted.web.http_headers import Headers
from twisted.web.iweb import IAgentEndpointFactory, IResponse
from zope.interface import implementer

from gateway.channels.http import BodyTooLarge, UpstreamError, UpstreamResponse
from gateway.channels.quiet_pool import QuietHTTPConnectionPool
from gateway.net_policy import UnsafeUrl, UrlPolicy, check_address, literal_address

USER_AGENT = b"Lockgate/1.0 (+sync; status)"
MAX_MESSAGE = 500


class FetchError(Exception):
    """The request failed (connect, timeout, body too large, ...); the text says how."""


@dataclass(frozen=True)
class Fetched:
    status: int
    body: bytes


@implementer(IAgentEndpointFactory)
class _Pinned:
    """Connects to one already-checked address, whatever the URL's host resolves to now."""

    def __init__(self, reactor: Any, address: str, timeout: float) -> None:
        self._reactor = reactor
        self._address = address
        self._timeout = timeout
        self._tls = BrowserLikePolicyForHTTPS()

    def endpointForURI(self, uri: URI) -> IStreamClientEndpoint:
        endpoint: IStreamClientEndpoint = HostnameEndpoint(
            self._reactor, self._address.encode("ascii"), uri.port, timeout=self._timeout)
        if uri.scheme == b"https":
            endpoint = wrapClientTLS(self._tls.creatorForNetloc(uri.host, uri.port), endpoint)
        return endpoint


async def checked_address(reactor: Any, host: str, policy: UrlPolicy) -> str:
    """The address to connect to for ``host``, after the policy's connect-time check."""
    literal = literal_address(host)
    if literal is not None:
        address = str(literal)
    else:
        try:
            address = await reactor.resolve(host)
        except Exception:
            raise FetchError(_short(f"cannot resolve {host}")) from None
    try:
        check_address(host, address, policy)
    except UnsafeUrl as exc:
        raise FetchError(f"unsafe address for {host}: {exc}") from None
    return address


def _short(text: str) -> str:
    return text[:MAX_MESSAGE]


def _cancelled(failure: Failure) -> bool:
    if failure.check(CancelledError):
        return True
    return any(reason.check(CancelledError) for reason in getattr(failure.value, "reasons", ()))


def describe(failure: Failure) -> str:
    reasons = getattr(failure.value, "reasons", None)
    if reasons:
        return "; ".join(r.getErrorMessage() for r in reasons)
    return failure.getErrorMessage() or failure.type.__name__


async def fetch(reactor: Any, clock: Any, url: str, *, method: str = "GET",
                headers: dict[str, str] | None = None, timeout: float = 10,
                limit: int = 4 << 20, read_body: bool = True,
                policy: UrlPolicy | None = None) -> Fetched:
    """``method url``; fires with the status and (up to ``limit`` bytes of) body.

    Raises ``FetchError`` on any failure, including ``timeout`` seconds passing on ``clock``
    before the body is complete.  With ``read_body`` false the body is discarded unread and the
    connection closed as soon as the headers arrived.
    """
    pool = QuietHTTPConnectionPool(reactor, persistent=False)
    all_headers = Headers({b"user-agent": [USER_AGENT]})
    for name, value in (headers or {}).items():
        all_headers.setRawHeaders(name.encode("latin-1"), [value.encode("latin-1")])
    expired: list[bool] = []
    current: dict[str, Any] = {}

    def expire() -> None:
        expired.append(True)
        if "response" in current:
            current["response"].abort()
        elif "request" in current:
            current["request"].cancel()

    timer = clock.callLater(timeout, expire)
    try:
        if policy is None:
            agent = Agent(reactor, connectTimeout=timeout, pool=pool)
        else:
            try:
                host = URI.fromBytes(url.encode("ascii")).host.decode("ascii").strip("[]")
            except Exception as exc:
                raise FetchError(_short(f"bad URL: {exc}")) from None
            address = await checked_address(reactor, host, policy)
            if expired:
                raise FetchError(f"timeout after {timeout:g}s")
            agent = Agent.usingEndpointFactory(reactor, _Pinned(reactor, address, timeout),
                                               pool=pool)
        try:
            sent: Deferred[IResponse] = agent.request(method.encode("ascii"),
                                                      url.encode("ascii"), all_headers, None)
        except Exception as exc:  # malformed URL
            raise FetchError(_short(f"bad URL: {exc}")) from None
        current["request"] = sent
        try:
            raw = await sent
        except Exception:
            failure = Failure()
            if expired:
                raise FetchError(f"timeout after {timeout:g}s") from None
            if _cancelled(failure):
                raise CancelledError() from None  # our caller cancelled: not a fetch failure
            raise FetchError(_short(describe(failure))) from None
        response = UpstreamResponse(raw, clock)
        current["response"] = response
        if not read_body:
            response.abort()
            return Fetched(raw.code, b"")
        try:
            body = await response.read_all(limit, idle_timeout=timeout)
        except BodyTooLarge:
            raise FetchError(f"response body is larger than {limit} bytes") from None
        except UpstreamError as exc:
            if expired:
                raise FetchError(f"timeout after {timeout:g}s") from None
            raise FetchError(_short(str(exc) or type(exc).__name__)) from None
        return Fetched(raw.code, body)
    finally:
        if timer.active():
            timer.cancel()
