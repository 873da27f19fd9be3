"""Writing a streamed answer to the client: held headers, backpressure, heartbeats, disconnects.

``StreamWriter`` is transform-agnostic: callers hand it bytes.  What it guarantees:

- Status and headers are held until the first ``write``: until then nothing has reached the
  client, so a failure can still become an ordinary error response or a failover
  (``started`` says which side of that line we are on).
- Each ``write`` goes to the transport at once (SSE clients expect every event flushed).
- It registers as the request's streaming producer: when the client reads slowly twisted.web
  calls ``pauseProducing`` and we pause the upstream body (``source.pause()``), so memory stays
  bounded instead of buffering a whole stream for a slow reader.
- A client disconnect (``notifyFinish`` errback, or ``stopProducing`` from the channel)
  aborts the upstream in the same reactor turn; ``closed_by_client`` records it for billing.
- Heartbeat comments every ``heartbeat_interval`` seconds of silence once the stream started
  (proxies and clients drop idle connections).  Before the first byte there is no heartbeat:
  headers are still held and the first-byte timeout owns that period.

``EventRelay`` is the small adapter between an upstream body and the writer for SSE: it parses
events and lets a caller-supplied ``on_event(event) -> bytes | None`` decide what the client
gets (translators plug in there; metering reads events there).  The upstream client hands over
everything one socket read brought at once, so one call may complete several events: each
still goes through ``on_event`` on its own, and what they give the client leaves in one
``write`` -- one ``send()`` per read instead of one per event (issue 22, goal 4).  The bytes the
client reads are the same; only the transfer-encoding's chunking of them differs.
``BytesRelay`` copies raw chunks (audio, passthrough of non-SSE bodies).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol

from twisted.internet.defer import Deferred
from twisted.internet.interfaces import IDelayedCall, IPushProducer
from twisted.python.failure import Failure
from zope.interface import implementer

from gateway.protocols.sse import PING, SSEError, SSEEvent, SSEParser


class StreamSource(Protocol):
    """What the writer controls upstream (``UpstreamResponse`` fits)."""

    def pause(self) -> None: ...

    def resume(self) -> None: ...

    def abort(self) -> None: ...


class ClientGone(Exception):
    """The client closed its connection before the stream ended."""


@implementer(IPushProducer)
class StreamWriter:
    """One per streamed client response; see the module docstring for the guarantees.

    Slotted, as is everything a stream keeps for its whole life (``EventRelay``,
    ``UpstreamResponse``): a process holds 10,000 of them at once (issue 22)."""

    __slots__ = ("_clock", "_code", "_headers", "_heartbeat", "_heartbeat_interval",
                 "_last_write", "_paused", "_source", "_timer", "bytes_sent",
                 "closed_by_client", "finished", "first_byte_at", "pause_count", "request")

    def __init__(self, request: Any, clock: Any, *, heartbeat_interval: float | None = 15.0,
                 heartbeat: bytes = PING) -> None:
        self.request = request
        self._clock = clock
        self._heartbeat_interval = heartbeat_interval
        self._heartbeat = heartbeat
        self._code = 200
        self._headers: list[tuple[bytes, bytes]] = []
        self._source: StreamSource | None = None
        self._timer: IDelayedCall | None = None
        self._last_write = 0.0
        self._paused = False
        #: clock time of the first byte sent to the client (None until then)
        self.first_byte_at: float | None = None
        self.bytes_sent = 0
        self.closed_by_client = False
        self.finished = False
        #: times the client side asked us to pause (tests assert backpressure)
        self.pause_count = 0
        if request.channel is None:
            # the client left before this writer existed: notifyFinish would never fire
            self.closed_by_client = True
            self.finished = True
        else:
            request.notifyFinish().addCallbacks(self._request_done, self._client_gone)

    @property
    def started(self) -> bool:
        """True once status and headers went out: from here on failures are in-stream."""
        return self.first_byte_at is not None

    @property
    def active(self) -> bool:
        return not self.finished and not self.closed_by_client

    def attach(self, source: StreamSource) -> None:
        """The upstream to pause, resume and abort along with the client."""
        self._source = source
        if self.closed_by_client:
            source.abort()
        elif self._paused:
            source.pause()

    def set_response(self, code: int, headers: Iterable[tuple[bytes | str, bytes | str]]) -> None:
        """Status and headers to send with the first write (replaces earlier ones)."""
        if self.started:
            raise RuntimeError("response headers were already sent")
        self._code = code
        self._headers = [(_b(k), _b(v)) for k, v in headers]

    def write(self, data: bytes) -> None:
        if not data or not self.active:
            return
        if self.first_byte_at is None:
            self._start()
        self.request.write(data)
        self.bytes_sent += len(data)
        self._last_write = self._clock.seconds()

    def finish(self) -> None:
        """End the response normally (sends the held headers if nothing was written)."""
        if not self.active:
            return
        if self.first_byte_at is None:
            self._start()
        self._close()
        self.request.unregisterProducer()
        self.request.finish()

    def _start(self) -> None:
        request = self.request
        request.setResponseCode(self._code)
        for name, value in self._headers:
            request.responseHeaders.addRawHeader(name, value)
        self._headers = []  # sent: nothing to keep for the rest of the stream
        request.registerProducer(self, True)
        self.first_byte_at = self._clock.seconds()
        self._last_write = self.first_byte_at
        if self._heartbeat_interval:
            self._timer = self._clock.callLater(self._heartbeat_interval, self._beat)

    def _beat(self) -> None:
        self._timer = None
        if not self.active:
            return
        assert self._heartbeat_interval is not None
        quiet = self._clock.seconds() - self._last_write
        if quiet >= self._heartbeat_interval and not self._paused:
            self.write(self._heartbeat)
            quiet = 0.0
        self._timer = self._clock.callLater(max(self._heartbeat_interval - quiet, 0.001),
                                            self._beat)

    def _close(self) -> None:
        self.finished = True
        if self._timer is not None and self._timer.active():
            self._timer.cancel()
        self._timer = None

    def _request_done(self, _: object) -> None:
        # finished by us, or answered directly by the caller before the stream started
        self._close()

    def _client_gone(self, reason: Failure) -> None:
        if self.finished or self.closed_by_client:
            return
        self.closed_by_client = True
        self._close()
        if self._source is not None:
            self._source.abort()

    # IPushProducer, driven by twisted.web according to the client's reading speed

    def pauseProducing(self) -> None:
        if self._paused:
            return
        self._paused = True
        self.pause_count += 1
        if self._source is not None:
            self._source.pause()

    def resumeProducing(self) -> None:
        if not self._paused:
            return
        self._paused = False
        if self._source is not None:
            self._source.resume()

    def stopProducing(self) -> None:
        self._client_gone(Failure(ClientGone("client connection closed")))


def _b(value: bytes | str) -> bytes:
    return value if isinstance(value, bytes) else value.encode("latin-1")


class EventRelay:
    """Upstream SSE body -> ``on_event`` -> writer.  A ``BodySink`` for ``deliver``.

    ``done`` fires with None when the upstream body ended cleanly and fails with the reason
    otherwise (``UpstreamAborted`` after a client disconnect, ``UpstreamTimeout``, ``SSEError``
    ...).  The writer is never finished here: the caller decides what ends the stream (a
    ``[DONE]``, an error event) and then calls ``writer.finish()``.
    """

    __slots__ = ("_on_event", "_parser", "_source", "_writer", "done", "events")

    def __init__(self, writer: StreamWriter, source: StreamSource,
                 on_event: Callable[[SSEEvent], bytes | None], *,
                 parser: SSEParser | None = None) -> None:
        self._writer = writer
        self._source = source
        self._on_event = on_event
        self._parser = parser or SSEParser()
        self.events = 0
        self.done: Deferred[None] = Deferred()
        writer.attach(source)

    def data_received(self, data: bytes) -> None:
        try:
            events = self._parser.feed(data)
        except SSEError as exc:
            # the whole events before the fault are relayed (and metered) first
            if self._relay(exc.events):
                self._fail(Failure(exc))
            return
        if events:
            self._relay(events)

    def _relay(self, events: Sequence[SSEEvent]) -> bool:
        """Each event through ``on_event``, their output in one write; False when
        ``on_event`` raised (the output of the events before it is written, then we fail)."""
        on_event = self._on_event
        outs: list[bytes] = []
        failure: Failure | None = None
        for event in events:
            self.events += 1
            try:
                out = on_event(event)
            except Exception:
                failure = Failure()
                break
            if out:
                outs.append(out)
        if outs:
            self._writer.write(outs[0] if len(outs) == 1 else b"".join(outs))
        if failure is not None:
            self._fail(failure)
            return False
        return True

    def body_finished(self, reason: Failure | None) -> None:
        if self.done.called:
            return
        if reason is None:
            self.done.callback(None)
        else:
            self.done.errback(reason)

    def _fail(self, reason: Failure) -> None:
        if not self.done.called:
            self.done.errback(reason)
        self._source.abort()


class BytesRelay:
    """Upstream body -> writer, chunk by chunk, unchanged.  ``done`` as in ``EventRelay``."""

    __slots__ = ("_on_chunk", "_writer", "done")

    def __init__(self, writer: StreamWriter, source: StreamSource,
                 on_chunk: Callable[[bytes], object] | None = None) -> None:
        self._writer = writer
        self._on_chunk = on_chunk
        self.done: Deferred[None] = Deferred()
        writer.attach(source)

    def data_received(self, data: bytes) -> None:
        if self._on_chunk is not None:
            self._on_chunk(data)
        self._writer.write(data)

    def body_finished(self, reason: Failure | None) -> None:
        if self.done.called:
            return
        if reason is None:
            self.done.callback(None)
        else:
            self.done.errback(reason)
