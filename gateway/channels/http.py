"""The upstream HTTP client: a lean HTTP/1.1 connection pool (``lean_pool``), nothing between.

Why each piece exists (DESIGN.md "The /v1 path" and its Gotchas):

- Requests go through ``gateway.channels.lean_pool``, not ``twisted.web.client.Agent``: the
  DESIGN allows talking "lower" than Agent, and Agent's Python response parser, ``Headers``
  objects, ``Response`` layers and the pool's Deferred chains were the largest block of a
  relayed request's CPU.  Responses are parsed by httptools (llhttp, C); the request is one
  write.  The pool keeps up to ``max_persistent_per_host`` idle connections per (scheme, host,
  port, policy number), each closed after ``cached_connection_timeout`` seconds idle.
  (``gateway.sync.fetch`` still builds on Agent: it is not on the hot path, and wraps an
  Agent response in ``UpstreamResponse`` -- which takes any object with Agent's response
  interface.)
- ``max_concurrent_per_host`` is an optional ``DeferredSemaphore`` per (scheme, host, port)
  that bounds requests in flight.  A slot is held until the response body has been delivered,
  read, or aborted.
- ``first_byte_timeout`` covers connect + sending + response headers: the request's Deferred is
  cancelled (which closes the connection) and the caller gets ``UpstreamTimeout``, a failure it
  may fail over on.  Body time is not covered: streams have no total cap.
- The body goes to our own ``IProtocol`` (``UpstreamResponse.deliver``), never ``treq.collect``:
  ``abort()`` here calls the transport's ``stopProducing()`` which closes the socket.
  ``pause()``/``resume()`` map to the transport's ``pauseProducing()``/``resumeProducing()`` so
  a slow client slows the upstream (backpressure).
- An idle timer per body (no bytes for ``idle_timeout`` seconds -> abort, ``UpstreamTimeout``):
  a stalled upstream must not hold a client, a socket and a reservation forever.  The timer
  only records a timestamp per chunk and re-arms itself when it fires, so the per-chunk cost
  is one ``clock.seconds()`` call.
- Every new connection goes through the outbound-safety connector
  (``gateway.channels.safe_connect``): the host is resolved once, every address checked against
  the SSRF policy of the live settings, and the connection made to a checked address (https:
  TLS on top, verified by the TLS policy for the URL's host).  The pool key carries the
  policy's number, so a connection checked under one policy is not reused after the policy
  changed; a refusal is ``UpstreamBlocked``.
- What a request needs from its URL (validation, parse, pool key, endpoint, request target,
  ``Host`` value) is cached per URL as a ``_Target``: a gateway sends to the same few URLs all
  day, and parsing them was ~4% of a relayed request's CPU.
- Every timer uses the injected ``clock`` (the reactor by default) so tests drive time.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from twisted.internet.defer import (
    CancelledError,
    Deferred,
    DeferredSemaphore,
    fail,
    succeed,
)
from twisted.internet.interfaces import IDelayedCall, IStreamClientEndpoint
from twisted.internet.protocol import Protocol as TwistedProtocol
from twisted.python.failure import Failure
from twisted.web._newclient import _ensureValidMethod, _ensureValidURI
from twisted.web.client import (
    URI,
    BrowserLikePolicyForHTTPS,
    ResponseDone,
)
from twisted.web.http import PotentialDataLoss
from twisted.web.http_headers import Headers
from twisted.web.iweb import UNKNOWN_LENGTH, IResponse

from gateway.channels.lean_pool import IDEMPOTENT, LeanPool
from gateway.channels.net_policy import UrlPolicy
from gateway.channels.safe_connect import (
    OPEN_POLICY,
    AddressVetter,
    GuardedEndpointFactory,
    LivePolicy,
    refusal_of,
)


class UpstreamError(Exception):
    """Base of every failure this client reports."""


class UpstreamUnavailable(UpstreamError):
    """No response headers: connection refused, DNS failure, reset before the answer."""


class UpstreamBlocked(UpstreamUnavailable):
    """The connector refused the upstream: its name resolves to an address the SSRF policy
    refuses.  Nothing was sent."""


class UpstreamTimeout(UpstreamError):
    """``phase`` is ``"first_byte"`` (connect + headers) or ``"idle"`` (body stalled)."""

    def __init__(self, phase: str, seconds: float) -> None:
        super().__init__(f"upstream {phase.replace('_', ' ')} timeout after {seconds:g}s")
        self.phase = phase
        self.seconds = seconds


class UpstreamAborted(UpstreamError):
    """We closed the body ourselves (``abort()``), e.g. because the client went away."""


class CutByShutdown(UpstreamError):
    """We closed the body because the process is stopping (the drain's grace ran out)."""


class BodyTooLarge(UpstreamError):
    """A body read with ``read_all(limit)`` exceeded the limit."""


class UpstreamBodyFailed(UpstreamError):
    """The connection broke in the middle of the body."""


class BodySink(Protocol):
    """Where ``UpstreamResponse.deliver`` sends the body.  From the lean client: one
    ``data_received`` per socket read, however many HTTP chunks it carried (joined)."""

    def data_received(self, data: bytes) -> None: ...

    def body_finished(self, reason: Failure | None) -> None:
        """None on a clean end; otherwise a Failure wrapping an ``UpstreamError``."""


class _CachedEndpoints:
    """Guarded TCP for http, guarded TCP+TLS (hostname verified by the policy) for https, built
    once per (scheme, host, port, policy number): each goes through the outbound-safety
    connector (``gateway.channels.safe_connect``) under the policy it was made for."""

    #: a gateway talks to a handful of upstream hosts; this only bounds a misconfiguration
    MAX_ENTRIES = 1024

    def __init__(self, factory: GuardedEndpointFactory) -> None:
        self._factory = factory
        self._cache: dict[tuple[bytes, bytes, int, int], IStreamClientEndpoint] = {}

    def endpoint(self, uri: URI, generation: int, policy: UrlPolicy) -> IStreamClientEndpoint:
        key = (uri.scheme, uri.host, uri.port, generation)
        endpoint = self._cache.get(key)
        if endpoint is not None:
            return endpoint
        endpoint = self._factory.endpoint(uri.scheme, uri.host, uri.port, policy)
        if len(self._cache) >= self.MAX_ENTRIES:
            self._cache.clear()
        self._cache[key] = endpoint
        return endpoint


@dataclass(frozen=True, slots=True)
class _Target:
    """What ``Agent.request`` derives from one URL, derived once."""

    uri: URI
    #: the connection pool's key: (scheme, host, port, policy number)
    key: tuple[bytes, bytes, int, int]
    endpoint: IStreamClientEndpoint
    #: the request line's target (path and query)
    path: bytes
    #: the ``Host`` header's value
    host: bytes


class UpstreamClient:
    """One per process (or per group of upstreams): owns the connection pool."""

    #: a gateway talks to a handful of upstream URLs; this only bounds a misconfiguration
    MAX_TARGETS = 4096

    def __init__(self, reactor: Any, *, clock: Any = None, max_persistent_per_host: int = 64,
                 max_concurrent_per_host: int | None = None, connect_timeout: float = 10,
                 cached_connection_timeout: float = 240, tls_policy: Any = None,
                 policy: LivePolicy | None = None, vetter: AddressVetter | None = None
                 ) -> None:
        self._clock = clock if clock is not None else reactor
        self._pool = LeanPool(self._clock, max_idle_per_key=max_persistent_per_host,
                              idle_timeout=cached_connection_timeout)
        #: None: no SSRF policy (protection off), but connections still go to checked addresses
        self._policy = policy
        factory = GuardedEndpointFactory(
            reactor, vetter=vetter if vetter is not None else AddressVetter(reactor, self._clock),
            tls_policy=tls_policy or BrowserLikePolicyForHTTPS(), connect_timeout=connect_timeout)
        self._endpoints = _CachedEndpoints(factory)
        self._targets: dict[bytes, _Target] = {}
        self._methods: set[bytes] = set()
        self._max_concurrent = max_concurrent_per_host
        self._slots: dict[tuple[bytes, bytes, int], DeferredSemaphore] = {}

    @property
    def connections_opened(self) -> int:
        """Upstream connections opened so far (tests assert pooled reuse)."""
        return self._pool.connections_opened

    def request(self, method: bytes | str, url: bytes | str,
                headers: dict[bytes, list[bytes]] | Headers | None, body: bytes | None, *,
                first_byte_timeout: float) -> Deferred[UpstreamResponse]:
        """Send one request; fires with the response once its headers arrived.

        Fails with ``UpstreamTimeout("first_byte")`` or ``UpstreamUnavailable``; the body of a
        successful response must then be delivered, read or aborted (that frees the
        connection and the concurrency slot).
        """
        method_b = method.encode("ascii") if isinstance(method, str) else method
        url_b = url.encode("ascii") if isinstance(url, str) else url
        try:
            target = self._target(url_b)
            if method_b not in self._methods:
                _ensureValidMethod(method_b)
                if len(self._methods) < 64:
                    self._methods.add(method_b)
            data = request_bytes(method_b, target.path, target.host, headers, body)
        except Exception as exc:  # not a URL, method or header we can send
            return fail(UpstreamUnavailable(f"bad upstream request: {exc}"))
        may_resend = body is None and method_b in IDEMPOTENT
        if self._max_concurrent is None:
            return self._send(method_b, target, data, may_resend, first_byte_timeout, None)
        semaphore = self._slot(target.key)
        outcome: Deferred[UpstreamResponse] = Deferred(lambda _: waiting.cancel())
        timed_out: list[bool] = []

        def on_timeout() -> None:
            timed_out.append(True)
            waiting.cancel()

        started = self._clock.seconds()
        timer = self._clock.callLater(first_byte_timeout, on_timeout)
        waiting: Deferred[Any] = semaphore.acquire()

        def acquired(_: object) -> Any:
            if timer.active():
                timer.cancel()
            remaining = first_byte_timeout - (self._clock.seconds() - started)
            return self._send(method_b, target, data, may_resend, max(remaining, 0.001),
                              semaphore.release)

        def not_acquired(failure: Failure) -> Failure:
            if timer.active():
                timer.cancel()
            if timed_out and failure.check(CancelledError):
                return Failure(UpstreamTimeout("first_byte", first_byte_timeout))
            return failure

        waiting.addCallbacks(acquired, not_acquired)
        waiting.chainDeferred(outcome)
        return outcome

    def _target(self, url: bytes) -> _Target:
        """The cached ``_Target`` of ``url`` under the current SSRF policy; raises for a URL
        that cannot be sent to."""
        generation, policy = (0, OPEN_POLICY) if self._policy is None else self._policy.current()
        target = self._targets.get(url)
        if target is not None and target.key[3] == generation:
            return target
        uri = URI.fromBytes(_ensureValidURI(url.strip()))
        if uri.scheme not in (b"http", b"https"):
            raise ValueError(f"unsupported upstream scheme {uri.scheme!r}")
        endpoint = self._endpoints.endpoint(uri, generation, policy)
        default_port = 80 if uri.scheme == b"http" else 443
        host = uri.host if uri.port == default_port else b"%s:%d" % (uri.host, uri.port)
        target = _Target(uri, (uri.scheme, uri.host, uri.port, generation), endpoint,
                         uri.originForm, host)
        if len(self._targets) >= self.MAX_TARGETS:
            self._targets.clear()
        self._targets[url] = target
        return target

    def _slot(self, key: tuple[bytes, bytes, int, int]) -> DeferredSemaphore:
        slot_key = (key[0], key[1], key[2])  # one limit per host, whatever the policy
        semaphore = self._slots.get(slot_key)
        if semaphore is None:
            assert self._max_concurrent is not None
            semaphore = self._slots[slot_key] = DeferredSemaphore(self._max_concurrent)
        return semaphore

    def _send(self, method: bytes, target: _Target, data: bytes, may_resend: bool,
              timeout: float, release: Callable[[], object] | None
              ) -> Deferred[UpstreamResponse]:
        sent = self._pool.request(target.key, target.endpoint, method, data,
                                  may_resend=may_resend)
        timed_out: list[bool] = []

        def on_timeout() -> None:
            timed_out.append(True)
            sent.cancel()

        timer: IDelayedCall = self._clock.callLater(timeout, on_timeout)

        def got(response: IResponse) -> UpstreamResponse:
            if timer.active():
                timer.cancel()
            return UpstreamResponse(response, self._clock, release)

        def failed(failure: Failure) -> Failure:
            if timer.active():
                timer.cancel()
            if release is not None:
                release()
            if timed_out:
                return Failure(UpstreamTimeout("first_byte", timeout))
            if failure.check(CancelledError):
                return failure
            refused = refusal_of(failure.value)
            if refused is not None:
                return Failure(UpstreamBlocked(str(refused)))
            return Failure(UpstreamUnavailable(_describe(failure)))

        return sent.addCallbacks(got, failed)

    def close(self) -> Deferred[Any]:
        """Close idle pooled connections (on shutdown, and at the end of tests)."""
        return self._pool.close()


def _one_line(value: bytes) -> bytes:
    """A header name or value on one line (as ``Headers`` makes it): CR and LF become spaces."""
    return value.replace(b"\r\n", b" ").replace(b"\r", b" ").replace(b"\n", b" ")


def request_bytes(method: bytes, path: bytes, host: bytes,
                  headers: dict[bytes, list[bytes]] | Headers | None, body: bytes | None
                  ) -> bytes:
    """The whole HTTP/1.1 request as Agent would write it: the caller's headers (its own
    ``Host`` if it gave one), ``Content-Length`` for a body (0 for a body-less PUT/POST).

    A CR or LF inside a header name or value becomes a space (no header injection).  Rather
    than scanning every value, the head is built as given and its CR and LF counted once: any
    more than the lines written means a value carried one, and only then is it rebuilt
    value by value."""
    head, lines = _head(method, path, host, headers, clean=False)
    if head.count(b"\n") != lines or head.count(b"\r") != lines:
        head, lines = _head(method, path, host, headers, clean=True)
    if body is not None:
        return b"%sContent-Length: %d\r\n\r\n%s" % (head, len(body), body)
    if method in (b"POST", b"PUT"):
        return head + b"Content-Length: 0\r\n\r\n"
    return head + b"\r\n"


def _head(method: bytes, path: bytes, host: bytes,
          headers: dict[bytes, list[bytes]] | Headers | None, *, clean: bool
          ) -> tuple[bytes, int]:
    """The request line and header lines (without the body's framing), and how many."""
    parts = [method, b" ", path, b" HTTP/1.1\r\n"]
    lines = 1
    has_host = False
    if headers is not None:
        items = headers.getAllRawHeaders() if isinstance(headers, Headers) else headers.items()
        for name, values in items:
            lower = name.lower()
            if lower == b"content-length":
                continue  # framed from the body itself
            if lower == b"host":
                has_host = True
            if clean:
                name = _one_line(name)
            for value in values:
                parts += (name, b": ", _one_line(value) if clean else value, b"\r\n")
                lines += 1
    if not has_host:
        parts += (b"Host: ", host, b"\r\n")
        lines += 1
    return b"".join(parts), lines


def _describe(failure: Failure) -> str:
    reasons = getattr(failure.value, "reasons", None)
    if reasons:
        return "; ".join(r.getErrorMessage() for r in reasons)
    return failure.getErrorMessage()


class UpstreamResponse:
    """Status and headers of an upstream answer, plus control over its body."""

    __slots__ = ("_aborted_early", "_body", "_clock", "_release", "_response", "code",
                 "first_body_at", "headers", "length", "pause_count", "phrase")

    def __init__(self, response: IResponse, clock: Any,
                 release: Callable[[], object] | None = None) -> None:
        self.code: int = response.code
        self.phrase: bytes = response.phrase
        #: ``Headers`` (Agent) or ``ResponseHeaders`` (lean client): read with getRawHeaders
        self.headers: Any = response.headers
        self.length: int | None = (None if response.length is UNKNOWN_LENGTH
                                   else int(response.length))
        self._response = response
        self._clock = clock
        self._release = release
        self._body: _BodyProtocol | None = None
        self._aborted_early = False
        #: how many times pause() actually paused the transport (tests assert backpressure)
        self.pause_count = 0
        #: clock time the first body byte arrived (None until then): time to first byte
        self.first_body_at: float | None = None

    def header(self, name: bytes) -> bytes | None:
        values = self.headers.getRawHeaders(name)
        return values[0] if values else None

    def deliver(self, sink: BodySink, *, idle_timeout: float) -> None:
        """Stream the body to ``sink``; exactly one ``body_finished`` call ends it."""
        if self._aborted_early:
            # abort() came first (e.g. the client left before the relay was wired up)
            sink.body_finished(Failure(UpstreamAborted("upstream body aborted")))
            return
        if self._body is not None:
            raise RuntimeError("the body is already being delivered")
        body = self._body = _BodyProtocol(self, sink, self._clock, idle_timeout)
        self._response.deliverBody(body)
        if not body.finished:
            # a body that was already complete (a JSON answer read with its headers) ends
            # inside deliverBody: only one still arriving needs the idle timer
            body.arm()

    def read_all(self, limit: int, *, idle_timeout: float = 300) -> Deferred[bytes]:
        """The whole body as bytes; fails with ``BodyTooLarge`` past ``limit`` bytes."""
        try:
            collected = self.collect(limit, idle_timeout=idle_timeout)
        except Exception:
            return fail()
        return succeed(collected) if isinstance(collected, bytes) else collected

    def collect(self, limit: int, *, idle_timeout: float = 300) -> bytes | Deferred[bytes]:
        """``read_all`` without a Deferred when the body is already here: the bytes at once
        (a JSON answer the lean client read whole with its head), else the Deferred of
        ``read_all``.  A body known to fail raises its ``UpstreamError`` at once."""
        collector = _Collector(self, limit)
        if self.length is not None and self.length > limit:
            self.abort()
            raise BodyTooLarge(f"upstream body of {self.length} bytes over {limit}")
        self.deliver(collector, idle_timeout=idle_timeout)
        return collector.result()

    def pause(self) -> None:
        if self._body is not None and self._body.pause():
            self.pause_count += 1

    def resume(self) -> None:
        if self._body is not None:
            self._body.resume()

    def abort(self, reason: UpstreamError | None = None) -> None:
        """Close the upstream connection now; the sink (if any) gets ``reason``
        (``UpstreamAborted`` unless given)."""
        if self._body is None:
            body = self._body = _BodyProtocol(self, _DISCARD, self._clock, 3600)
            self._response.deliverBody(body)
            self._aborted_early = True
            if body.finished:
                # the answer came whole (the lean client pooled its connection already): the
                # connection is closed all the same unless it carries another request
                stop = getattr(self._response, "stopProducing", None)
                if stop is not None:
                    stop()
                return
        self._body.stop(Failure(reason or UpstreamAborted("upstream body aborted")))

    @property
    def finished(self) -> bool:
        return self._body is not None and self._body.finished

    def _done(self) -> None:
        release, self._release = self._release, None
        if release is not None:
            release()


class _BodyProtocol(TwistedProtocol):
    """Receives the body from the Agent; owns the idle timer and the transport controls.

    Once finished it lets go of its owner, its sink and its transport: each of them refers
    back to it, and the cycles they made were left to the garbage collector -- ~10 objects
    per upstream answer, a young collection of ~10,000 every ~1,000 requests, each one a
    pause of milliseconds in the middle of some request (issue 22, goal 3).
    """

    def __init__(self, owner: UpstreamResponse, sink: BodySink, clock: Any,
                 idle_timeout: float) -> None:
        self._owner: UpstreamResponse | None = owner
        self._sink: BodySink = sink
        self._clock = clock
        self._idle_timeout = idle_timeout
        self._last_data = clock.seconds()
        self._timer: IDelayedCall | None = None
        self._paused = False
        self.finished = False

    def arm(self) -> None:
        """Start the idle timer (once the body is known to be still arriving)."""
        if not self.finished and self._timer is None:
            self._timer = self._clock.callLater(self._idle_timeout, self._idle_check)

    def dataReceived(self, data: bytes) -> None:
        if self.finished:
            return
        self._last_data = now = self._clock.seconds()
        owner = self._owner
        if owner is not None and owner.first_body_at is None:
            owner.first_body_at = now
        self._sink.data_received(data)

    def connectionLost(self, reason: Failure = None) -> None:  # type: ignore[assignment]
        if reason is None or reason.check(ResponseDone, PotentialDataLoss):
            self._finish(None)
        else:
            self._finish(Failure(UpstreamBodyFailed(_describe(reason))))

    def _idle_check(self) -> None:
        self._timer = None
        if self.finished:
            return
        quiet = self._clock.seconds() - self._last_data
        if self._paused or quiet < self._idle_timeout:
            # paused by our own backpressure: the upstream is not the one stalling
            delay = self._idle_timeout if self._paused else self._idle_timeout - quiet
            self._timer = self._clock.callLater(delay, self._idle_check)
            return
        self.stop(Failure(UpstreamTimeout("idle", self._idle_timeout)))

    def pause(self) -> bool:
        if self._paused or self.finished or self.transport is None:
            return False
        self._paused = True
        transport: Any = self.transport
        transport.pauseProducing()
        return True

    def resume(self) -> None:
        if not self._paused or self.finished or self.transport is None:
            return
        self._paused = False
        self._last_data = self._clock.seconds()
        transport: Any = self.transport
        transport.resumeProducing()

    def stop(self, reason: Failure) -> None:
        if self.finished:
            return
        transport: Any = self.transport
        self._finish(reason)
        if transport is not None:
            transport.stopProducing()

    def _finish(self, reason: Failure | None) -> None:
        if self.finished:
            return
        self.finished = True
        if self._timer is not None and self._timer.active():
            self._timer.cancel()
        self._timer = None
        owner, sink = self._owner, self._sink
        # no way back to the owner, the sink or the transport: no reference cycle to collect
        self._owner, self._sink, self.transport = None, _DISCARD, None
        if owner is not None:
            owner._done()
        sink.body_finished(reason)


class _Collector:
    """The sink behind ``collect`` and ``read_all``: the body's parts, then its one end (the
    whole body, or the first failure); a Deferred only when someone has to wait for it."""

    __slots__ = ("_ended", "_limit", "_owner", "_parts", "_size", "_waiting", "body", "error")

    def __init__(self, owner: UpstreamResponse, limit: int) -> None:
        self._owner: UpstreamResponse | None = owner
        self._limit = limit
        self._parts: list[bytes] = []
        self._size = 0
        self._ended = False
        self._waiting: Deferred[bytes] | None = None
        #: the whole body, once it ended cleanly
        self.body: bytes | None = None
        #: why it did not, once it failed
        self.error: Failure | None = None

    def result(self) -> bytes | Deferred[bytes]:
        """The body if it is complete, its failure raised if it failed, else a Deferred."""
        if self.error is not None:
            self.error.raiseException()
        if self.body is not None:
            return self.body
        waiting = self._waiting = Deferred()
        return waiting

    def data_received(self, data: bytes) -> None:
        if self._ended:
            return
        self._size += len(data)
        if self._size > self._limit:
            self._end(None, Failure(BodyTooLarge(f"upstream body over {self._limit} bytes")))
            if self._owner is not None:
                self._owner.abort()
            return
        self._parts.append(data)

    def body_finished(self, reason: Failure | None) -> None:
        self._owner = None  # the body is over: nothing to abort any more
        if reason is not None:
            self._end(None, reason)
            return
        parts = self._parts
        self._end(parts[0] if len(parts) == 1 else b"".join(parts), None)

    def _end(self, body: bytes | None, error: Failure | None) -> None:
        if self._ended:
            return
        self._ended = True
        self._parts = []
        self.body, self.error = body, error
        waiting, self._waiting = self._waiting, None
        if waiting is None:
            return
        if error is not None:
            waiting.errback(error)
        elif body is not None:
            waiting.callback(body)


class _Discard:
    """Sink for a body nobody wants (abort before delivery), and a finished body's."""

    def data_received(self, data: bytes) -> None:
        pass

    def body_finished(self, reason: Failure | None) -> None:
        pass


_DISCARD = _Discard()
