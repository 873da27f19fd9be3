"""One bounded server-side HTTP request for sync and health checks (not on the relay path).

Model/price sync, status monitors and channel probes each make an occasional request to an
admin-configured URL.  They share the same needs: a fresh ``Agent`` on the injected reactor
(no connection kept: these calls are rare), one deadline on the injected clock covering connect,
headers *and* body, a cap on how much body is read, and errors as one exception type with a
short message that is safe to show an admin.

The URL policy (SSRF guard): callers run ``gateway.channels.net_policy.check_url`` on the URL first
(scheme, literal addresses, metadata names).  Every connection then goes through the
outbound-safety connector (``gateway.channels.safe_connect``) under ``policy``: it resolves the
host once, checks *every* resolved address and connects to exactly a checked one (TLS still
verifies the original host name), so a name that resolves to a private or metadata address --
or changes its answer between check and connect -- is refused (``FetchRefused``).  Without a
policy (protection off) the connector still connects only to the addresses it resolved.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from twisted.internet.defer import CancelledError, Deferred
from twisted.python.failure import Failure
from twisted.web.client import Agent
from twisted.web.http_headers import Headers
from twisted.web.iweb import IResponse

from gateway.channels.bytes_body import BytesBody
from gateway.channels.http import BodyTooLarge, UpstreamError, UpstreamResponse
from gateway.channels.net_policy import UrlPolicy
from gateway.channels.quiet_pool import QuietHTTPConnectionPool
from gateway.channels.safe_connect import (
    OPEN_POLICY,
    AddressVetter,
    GuardedEndpointFactory,
    refusal_of,
)

USER_AGENT = b"Lockgate/1.0 (+sync; status)"
MAX_MESSAGE = 500


class FetchError(Exception):
    """The request failed (connect, timeout, body too large, ...); the text says how."""


class FetchRefused(FetchError):
    """Our own SSRF policy refused the connection (the host resolves to a refused address):
    a configuration problem, not an unreachable upstream.  Nothing was sent."""


@dataclass(frozen=True)
class Fetched:
    status: int
    body: bytes


def _header_safe(text: str) -> bool:
    """Printable ASCII only: what every upstream parses the same way."""
    return all(32 <= ord(ch) < 127 for ch in text)


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
                policy: UrlPolicy | None = None, body: bytes | None = None) -> Fetched:
    """``method url``; fires with the status and (up to ``limit`` bytes of) body.

    Raises ``FetchError`` on any failure, including ``timeout`` seconds passing on ``clock``
    before the body is complete.  With ``read_body`` false the body is discarded unread and the
    connection closed as soon as the headers arrived.  ``body`` (small) is sent as the request
    body.
    """
    pool = QuietHTTPConnectionPool(reactor, persistent=False)
    all_headers = Headers({b"user-agent": [USER_AGENT]})
    for name, value in (headers or {}).items():
        if not (_header_safe(name) and _header_safe(value)):
            raise FetchError(f"header {name} holds characters a header cannot carry")
        all_headers.setRawHeaders(name.encode("ascii"), [value.encode("ascii")])
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
        endpoints = GuardedEndpointFactory(reactor, policy or OPEN_POLICY,
                                           vetter=AddressVetter(reactor, clock),
                                           connect_timeout=timeout)
        agent = Agent.usingEndpointFactory(reactor, endpoints, pool=pool)
        try:
            sent: Deferred[IResponse] = agent.request(method.encode("ascii"),
                                                      url.encode("ascii"), all_headers,
                                                      None if body is None else BytesBody(body))
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
            refused = refusal_of(failure.value)
            if refused is not None:
                raise FetchRefused(_short(f"unsafe address for {refused}")) from None
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
