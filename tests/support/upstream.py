"""A fake OpenAI-compatible upstream on a real loopback port, for every relay test.

Usage::

    fake = FakeUpstream.start()            # listens on 127.0.0.1:<free port>
    self.addCleanup(fake.stop)
    channel_base_url = fake.base_url       # "http://127.0.0.1:<port>"
    ...
    assert fake.request_count == 1
    assert fake.requests[0].body["model"] == "gpt-fake"
    assert fake.open_connections == 0      # the gateway closed its socket

Routes: POST /v1/chat/completions, /v1/completions, /v1/responses (JSON, or SSE when
``"stream": true``), /v1/moderations, /v1/audio/speech (binary, chunked), /v1/audio/transcriptions
(multipart; answers how many bytes ``file`` had), /v1/images/generations, /v1/images/edits
(multipart), GET /v1/models.

Behaviour knobs, set on ``fake.knobs`` for every request, or per request through the model name
(tokens joined with ``+``, e.g. ``"gpt-x+chunks-50+pace-0.01"``; a per-request token wins):

=======================  ==================================================================
``fail-<status>``        answer that status with an OpenAI-style error body (429 adds
                         ``Retry-After: 1``)
``chunks-<n>``           n content chunks (default 3); one token each
``pace-<seconds>``       delay between chunks
``slow-first-byte-<s>``  wait before sending anything (status and headers included)
``stall-after-<n>``      stop after n content chunks but keep the connection open
                         (non-streamed: ``stall-after-0`` never answers)
``error-after-<n>``      after n content chunks send one error event and end the stream;
                         ``error-mid-stream`` = ``error-after-2``
``drop-after-<n>``       after n content chunks abort the TCP connection
``no-usage``             never report usage (not even with ``include_usage``)
``tools``                answer with a tool call instead of text
=======================  ==================================================================

Deterministic answers, so tests can assert exact billing: content chunk i is ``f"tok{i} "``;
``completion_tokens`` = number of content chunks sent (``min(chunks, max_tokens)``, finish
``length`` when cut), 3 for a tool call; ``prompt_tokens`` = ``count_prompt_tokens(body)``
(whitespace-separated words of every text in the request).  Streams end with a usage chunk
only when ``stream_options.include_usage`` is true (chat, completions), and ``data: [DONE]``.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import orjson
from twisted.internet import reactor as default_reactor
from twisted.internet.defer import Deferred
from twisted.protocols.policies import WrappingFactory
from twisted.web.resource import Resource
from twisted.web.server import NOT_DONE_YET, Site

from tests.support.upstream_answers import (
    CREATED,
    ROUTES,
    TOOL_ARGUMENT_PIECES,
    Knobs,
    Plan,
    content_piece,
    count_prompt_tokens,
    knobs_for,
    speech_bytes,
)

__all__ = ["CREATED", "TOOL_ARGUMENT_PIECES", "FakeUpstream", "Knobs", "RecordedRequest",
           "content_piece", "count_prompt_tokens", "knobs_for", "speech_bytes"]


@dataclass
class RecordedRequest:
    method: str
    path: str
    query: bytes
    headers: dict[str, str]
    body: Any  # parsed JSON, {field: bytes} for multipart, or None
    raw: bytes = field(repr=False)


class FakeUpstream(Resource):
    isLeaf = True

    def __init__(self, reactor: Any = None, clock: Any = None) -> None:
        super().__init__()
        self.reactor = reactor or default_reactor
        self.clock = clock or self.reactor
        self.knobs = Knobs()
        self.models = ["gpt-fake", "gpt-fake-mini"]
        #: when set, requests must carry it as Bearer token or x-api-key (else 401)
        self.api_key: str | None = None
        self.requests: list[RecordedRequest] = []
        self.connections_made = 0
        self.streams_cancelled = 0
        self._factory: _CountingFactory | None = None
        self._port: Any = None
        self._pending: set[Any] = set()

    # lifecycle

    @classmethod
    def start(cls, reactor: Any = None, clock: Any = None) -> FakeUpstream:
        fake = cls(reactor, clock)
        fake._factory = _CountingFactory(Site(fake), fake)
        fake._port = fake.reactor.listenTCP(0, fake._factory, interface="127.0.0.1")
        return fake

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._port.getHost().port}"

    def url(self, path: str) -> str:
        return self.base_url + path

    def stop(self) -> Deferred[None]:
        for call in list(self._pending):
            if call.active():
                call.cancel()
        self._pending.clear()
        assert self._factory is not None
        for proto in list(self._factory.protocols):
            proto.transport.abortConnection()
        return self._port.stopListening()

    @property
    def open_connections(self) -> int:
        return len(self._factory.protocols) if self._factory else 0

    @property
    def request_count(self) -> int:
        return len(self.requests)

    # dispatch

    def render(self, request: Any) -> Any:
        raw = request.content.read()
        path = request.path.decode()
        method = request.method.decode()
        headers = {k.decode().lower(): v[-1].decode("latin-1")
                   for k, v in request.requestHeaders.getAllRawHeaders()}
        ctype = headers.get("content-type", "")
        body: Any = None
        if ctype.startswith("multipart/form-data"):
            body = {k.decode(): v[0] for k, v in request.args.items()}
        elif raw:
            try:
                body = orjson.loads(raw)
            except orjson.JSONDecodeError:
                body = None
        self.requests.append(RecordedRequest(method, path, request.uri.partition(b"?")[2],
                                             headers, body, raw))
        if self.api_key is not None and self.api_key not in (
                headers.get("authorization", "").removeprefix("Bearer "),
                headers.get("x-api-key")):
            return self._error(request, 401, "Incorrect API key provided", "invalid_api_key")
        handler = ROUTES.get((method, path))
        if handler is None:
            return self._error(request, 404, f"Unknown route {method} {path}", "not_found")
        model = body.get("model", "") if isinstance(body, dict) else ""
        model = model.decode() if isinstance(model, bytes) else str(model)
        knobs = knobs_for(model, self.knobs)
        if knobs.status is not None:
            return self._error(request, knobs.status, f"fake upstream failure {knobs.status}",
                               "upstream_failure")
        return handler(self, request, body if body is not None else {}, knobs)

    def _error(self, request: Any, status: int, message: str, code: str) -> bytes:
        request.setResponseCode(status)
        request.setHeader(b"content-type", b"application/json")
        if status == 429:
            request.setHeader(b"retry-after", b"1")
        kind = {400: "invalid_request_error", 401: "invalid_request_error",
                429: "rate_limit_exceeded"}.get(status, "server_error")
        return orjson.dumps({"error": {"message": message, "type": kind, "param": None,
                                       "code": code}})

    # sending, with the knobs applied

    def _later(self, delay: float, fn: Any, *args: Any) -> None:
        call = self.clock.callLater(delay, self._run_pending, fn, args)
        self._pending.add(call)

    def _run_pending(self, fn: Any, args: tuple[Any, ...]) -> None:
        self._pending = {c for c in self._pending if c.active()}
        fn(*args)

    def _send(self, request: Any, plan: Plan) -> Any:
        state = {"gone": False, "index": 0, "content": 0}

        def gone(_: Any) -> None:
            state["gone"] = True
            self.streams_cancelled += 1

        request.notifyFinish().addErrback(gone)

        def step() -> None:
            knobs = plan.knobs
            while not state["gone"]:
                if state["index"] >= len(plan.pieces):
                    request.finish()
                    return
                data, is_content = plan.pieces[state["index"]]
                if is_content:
                    sent = state["content"]
                    if knobs.stall_after is not None and sent >= knobs.stall_after:
                        return  # keep the connection open, send nothing more
                    if knobs.error_after is not None and sent >= knobs.error_after:
                        request.write(plan.error)
                        request.finish()
                        return
                    if knobs.drop_after is not None and sent >= knobs.drop_after:
                        request.transport.loseConnection()  # flushed, then cut mid-body
                        return
                    state["content"] = sent + 1
                state["index"] += 1
                request.write(data)
                if is_content and knobs.pace > 0:
                    self._later(knobs.pace, step)
                    return

        def begin() -> None:
            if state["gone"]:
                return
            request.setHeader(b"content-type", plan.content_type)
            request.setHeader(b"x-request-id", f"req_{len(self.requests)}".encode())
            step()

        if plan.knobs.first_byte_delay > 0:
            self._later(plan.knobs.first_byte_delay, begin)
        else:
            begin()
        return NOT_DONE_YET

    def _send_json(self, request: Any, payload: Any, knobs: Knobs) -> Any:
        if knobs.stall_after == 0:
            return NOT_DONE_YET  # never answers
        plan = Plan(replace(knobs, stall_after=None, error_after=None, drop_after=None,
                             pace=0.0), b"application/json")
        plan.add(orjson.dumps(payload))
        return self._send(request, plan)


class _CountingFactory(WrappingFactory):
    """Tracks open connections (``protocols``) and counts every accepted one."""

    def __init__(self, wrapped: Any, fake: FakeUpstream) -> None:
        super().__init__(wrapped)
        self._fake = fake

    def registerProtocol(self, p: Any) -> None:
        self._fake.connections_made += 1
        super().registerProtocol(p)


