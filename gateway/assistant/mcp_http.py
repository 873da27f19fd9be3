"""One Streamable-HTTP exchange with an MCP server (agents contract §1.3 steps 1, 5, 6).

A JSON-RPC message is POSTed; the answer is a JSON body (a single object or a batch array) or
an event stream whose ``data:`` lines carry JSON-RPC objects.  The exchange -- connect,
redirects, headers and body -- has one deadline (30 s) and the body one size cap (4 MiB);
every connection goes through the ``Agent`` it is given, which for real use is the
outbound-safety agent, so the URL and each redirect target pass the SSRF guard.  A stream is
read only until the answer with the wanted id arrives; then the connection is dropped (an MCP
server may keep an event stream open), as it is when the cap or the deadline is hit.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urljoin

import orjson
from twisted.internet.defer import Deferred
from twisted.internet.protocol import Protocol
from twisted.python.failure import Failure
from twisted.web.client import ResponseDone
from twisted.web.http import PotentialDataLoss
from twisted.web.http_headers import Headers
from twisted.web.iweb import IAgent, IResponse

from gateway.channels.bytes_body import BytesBody
from gateway.channels.safe_connect import refusal_of
from gateway.protocols.sse import SSEError, SSEParser

EXCHANGE_TIMEOUT = 30.0
MAX_RESPONSE_BYTES = 4 * 1024 * 1024
MAX_REDIRECTS = 10
ERROR_BODY_BYTES = 2048
REDIRECTS = (307, 308)
SESSION_HEADER = b"Mcp-Session-Id"


class McpError(Exception):
    """The exchange failed; the message is what a run or a chat answer shows."""


@dataclass(frozen=True)
class Reply:
    """What one exchange gave: the JSON-RPC answer (None for 202/204) and the session id the
    server set, if any."""

    message: dict[str, Any] | None
    session_id: str | None


def _json(data: bytes) -> Any:
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return None


def answer_in(value: Any, want_id: int | None) -> dict[str, Any] | None:
    """The JSON-RPC answer in a decoded JSON value: an object with ``result`` or ``error``
    (and, when ``want_id`` is given, that id); in a batch the first such element."""
    for item in value if isinstance(value, list) else [value]:
        if isinstance(item, dict) and ("result" in item or "error" in item) and (
                want_id is None or item.get("id") == want_id):
            return item
    return None


def _describe(exc: Exception) -> str:
    """A short cause for a transport failure (Agent failures wrap their reasons)."""
    reasons = getattr(exc, "reasons", None)
    if reasons:
        return "; ".join(reason.getErrorMessage() for reason in reasons)
    return str(exc) or type(exc).__name__


def _canceller(request: Deferred[Any]) -> Callable[[Exception], None]:
    def cancel(_error: Exception) -> None:
        request.cancel()
    return cancel


class _BodyReader(Protocol):
    """Collects a body up to a cap; for a stream, stops as soon as the answer is in."""

    def __init__(self, done: Deferred[Any], limit: int, stream_id: int | None,
                 stream: bool, truncate: bool) -> None:
        self._done = done
        self._limit = limit
        self._stream = stream
        self._truncate = truncate
        self._want = stream_id
        self._parser = SSEParser(max_event_bytes=limit)
        self._chunks: list[bytes] = []
        self._size = 0

    def stop(self, error: Exception) -> None:
        """Drop the connection (deadline or cap) and fail the read."""
        self._fail(error)
        if self.transport is not None:
            self.transport.stopProducing()  # type: ignore[attr-defined]

    def _fail(self, error: Exception) -> None:
        if not self._done.called:
            self._done.errback(Failure(error))

    def dataReceived(self, data: bytes) -> None:
        if self._done.called:
            return
        self._size += len(data)
        if self._truncate:  # only the first ``limit`` bytes matter (error texts, drained bodies)
            self._chunks.append(data)
            if self._size >= self._limit:
                self._done.callback(b"".join(self._chunks)[:self._limit])
                self.transport.stopProducing()  # type: ignore[union-attr]
            return
        if self._size > self._limit:
            self.stop(McpError(f"mcp response exceeds {self._limit} bytes"))
            return
        if not self._stream:
            self._chunks.append(data)
            return
        try:
            events = self._parser.feed(data)
        except SSEError as exc:
            self.stop(McpError(f"mcp event stream is malformed: {exc}"))
            return
        for event in events:
            found = answer_in(_json(event.data), self._want)
            if found is not None:
                self._done.callback(found)
                self.transport.stopProducing()  # type: ignore[union-attr]
                return

    def connectionLost(self, reason: Failure = ResponseDone()) -> None:  # type: ignore[assignment]
        if self._done.called:
            return
        if self._truncate:
            self._done.callback(b"".join(self._chunks))
        elif not reason.check(ResponseDone, PotentialDataLoss):
            self._fail(McpError(f"mcp response was cut off: {reason.getErrorMessage()}"))
        elif self._stream:
            self._fail(McpError("mcp event stream ended without a response"))
        else:
            self._done.callback(b"".join(self._chunks))


class Exchange:
    """POSTs one message with one deadline; follows 307/308 redirects (each re-checked by the
    agent's connector)."""

    def __init__(self, agent: IAgent, clock: Any, *, timeout: float = EXCHANGE_TIMEOUT,
                 max_bytes: int = MAX_RESPONSE_BYTES) -> None:
        self._agent = agent
        self._clock = clock
        self._timeout = timeout
        self._max_bytes = max_bytes

    async def post(self, url: str, headers: list[tuple[str, str]], message: dict[str, Any]
                   ) -> Reply:
        pending: list[Callable[[Exception], None]] = []
        expired = McpError(f"mcp request timed out after {self._timeout:g}s")

        def on_timeout() -> None:
            for cancel in list(pending):
                cancel(expired)

        timer = self._clock.callLater(self._timeout, on_timeout)
        try:
            return await self._post(url, headers, message, pending)
        except McpError:
            raise
        except Exception as exc:
            if not timer.active():
                raise expired from None
            refused = refusal_of(exc)
            if refused is not None:
                raise McpError(f"mcp server address is not allowed: {refused}") from None
            raise McpError(f"mcp request failed: {_describe(exc)}") from None
        finally:
            if timer.active():
                timer.cancel()

    async def _post(self, url: str, headers: list[tuple[str, str]], message: dict[str, Any],
                    pending: list[Callable[[Exception], None]]) -> Reply:
        body = orjson.dumps(message)
        want_id = message.get("id")
        for _hop in range(MAX_REDIRECTS + 1):
            wire = Headers({k.encode("latin-1"): [v.encode("latin-1")] for k, v in headers})
            request = self._agent.request(b"POST", url.encode("utf-8"), wire, BytesBody(body))
            pending[:] = [_canceller(request)]
            response: IResponse = await request
            location = response.headers.getRawHeaders(b"location")
            if response.code in REDIRECTS and location:
                await self._drain(response, pending)
                url = urljoin(url, location[0].decode("latin-1"))
                continue
            return await self._answer(response, want_id, pending)
        raise McpError(f"mcp server redirected more than {MAX_REDIRECTS} times")

    async def _answer(self, response: IResponse, want_id: Any,
                      pending: list[Callable[[Exception], None]]) -> Reply:
        session = response.headers.getRawHeaders(SESSION_HEADER)
        session_id = session[0].decode("latin-1") if session else None
        if response.code in (202, 204):
            await self._drain(response, pending)
            if want_id is not None:
                raise McpError("mcp server sent no response")
            return Reply(None, session_id)
        if response.code >= 300:
            text = (await self._drain(response, pending)).decode("utf-8", "replace")
            raise McpError(f"mcp server returned {response.code}: {text}")
        if want_id is None:  # a notification answered with a body: nothing to wait for
            await self._drain(response, pending)
            return Reply(None, session_id)
        content_type = (response.headers.getRawHeaders(b"content-type") or [b""])[0]
        stream = content_type.split(b";")[0].strip().lower() == b"text/event-stream"
        got = await self._read(response, pending, stream=stream, want_id=want_id,
                               limit=self._max_bytes)
        found = got if stream else answer_in(_json(got), None)
        if found is None:
            raise McpError("mcp server sent no JSON-RPC response")
        return Reply(found, session_id)

    async def _read(self, response: IResponse, pending: list[Callable[[Exception], None]], *,
                    stream: bool = False, want_id: Any = None, limit: int = ERROR_BODY_BYTES,
                    truncate: bool = False) -> Any:
        done: Deferred[Any] = Deferred()
        reader = _BodyReader(done, limit, want_id, stream, truncate)
        pending[:] = [reader.stop]
        response.deliverBody(reader)
        return await done

    async def _drain(self, response: IResponse, pending: list[Callable[[Exception], None]]
                     ) -> bytes:
        """The first ``ERROR_BODY_BYTES`` of a body nobody needs whole (then hang up)."""
        return bytes(await self._read(response, pending, truncate=True))
