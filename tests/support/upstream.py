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

import re
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import Any

import orjson
from twisted.internet import reactor as default_reactor
from twisted.internet.defer import Deferred
from twisted.protocols.policies import WrappingFactory
from twisted.web.resource import Resource
from twisted.web.server import NOT_DONE_YET, Site

CREATED = 1_700_000_000
TOOL_ARGUMENT_PIECES = ['{"location": ', '"Paris", ', '"unit": "c"}']


@dataclass
class Knobs:
    status: int | None = None
    chunks: int = 3
    pace: float = 0.0
    first_byte_delay: float = 0.0
    stall_after: int | None = None
    error_after: int | None = None
    drop_after: int | None = None
    no_usage: bool = False
    tools: bool = False


_TOKEN_KNOBS: list[tuple[re.Pattern[str], str, Any]] = [
    (re.compile(r"fail-(\d{3})"), "status", int),
    (re.compile(r"chunks-(\d+)"), "chunks", int),
    (re.compile(r"pace-([\d.]+)"), "pace", float),
    (re.compile(r"slow-first-byte-([\d.]+)"), "first_byte_delay", float),
    (re.compile(r"stall-after-(\d+)"), "stall_after", int),
    (re.compile(r"error-after-(\d+)"), "error_after", int),
    (re.compile(r"drop-after-(\d+)"), "drop_after", int),
]


def knobs_for(model: str, base: Knobs) -> Knobs:
    """``base`` overridden by the knob tokens found in a model name."""
    changes: dict[str, Any] = {}
    for token in model.split("+"):
        if token == "no-usage":
            changes["no_usage"] = True
        elif token == "tools":
            changes["tools"] = True
        elif token == "error-mid-stream":
            changes["error_after"] = 2
        for pattern, name, convert in _TOKEN_KNOBS:
            match = pattern.fullmatch(token)
            if match:
                changes[name] = convert(match.group(1))
    return replace(base, **changes) if changes else base


def _texts(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, list):
        for item in value:
            yield from _texts(item)
    elif isinstance(value, dict):
        for key in ("content", "text", "input", "instructions", "prompt"):
            if key in value:
                yield from _texts(value[key])


def count_prompt_tokens(body: Any) -> int:
    """Words in every text of a request body (messages, prompt, input, instructions)."""
    if not isinstance(body, dict):
        return 0
    texts = list(_texts(body.get("messages"))) + list(_texts(body.get("prompt")))
    texts += list(_texts(body.get("input"))) + list(_texts(body.get("instructions")))
    return sum(len(text.split()) for text in texts)


def content_piece(i: int) -> str:
    return f"tok{i} "


@dataclass
class RecordedRequest:
    method: str
    path: str
    query: bytes
    headers: dict[str, str]
    body: Any  # parsed JSON, {field: bytes} for multipart, or None
    raw: bytes = field(repr=False)


class _Plan:
    """What one answer will send: pieces (some of them counted as content) and knobs."""

    def __init__(self, knobs: Knobs, content_type: bytes) -> None:
        self.knobs = knobs
        self.content_type = content_type
        self.pieces: list[tuple[bytes, bool]] = []
        self.error: bytes = b""

    def add(self, data: bytes, content: bool = False) -> None:
        self.pieces.append((data, content))


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
        handler = _ROUTES.get((method, path))
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

    def _send(self, request: Any, plan: _Plan) -> Any:
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
        plan = _Plan(replace(knobs, stall_after=None, error_after=None, drop_after=None,
                             pace=0.0), b"application/json")
        plan.add(orjson.dumps(payload))
        return self._send(request, plan)


def _completion_count(body: dict[str, Any], knobs: Knobs) -> tuple[int, str]:
    limit = body.get("max_completion_tokens") or body.get("max_tokens") \
        or body.get("max_output_tokens")
    if isinstance(limit, int) and 0 < limit < knobs.chunks:
        return limit, "length"
    return knobs.chunks, "stop"


def _sse(payload: Any, event: str | None = None) -> bytes:
    head = f"event: {event}\n".encode() if event else b""
    return head + b"data: " + orjson.dumps(payload) + b"\n\n"


def _chat_usage(prompt: int, completion: int) -> dict[str, Any]:
    return {"prompt_tokens": prompt, "completion_tokens": completion,
            "total_tokens": prompt + completion,
            "prompt_tokens_details": {"cached_tokens": 0},
            "completion_tokens_details": {"reasoning_tokens": 0}}


def _tool_name(body: dict[str, Any]) -> str:
    for tool in body.get("tools") or []:
        if isinstance(tool, dict):
            name = (tool.get("function") or {}).get("name") or tool.get("name")
            if name:
                return str(name)
    return "get_weather"


def _chat(fake: FakeUpstream, request: Any, body: dict[str, Any], knobs: Knobs) -> Any:
    model = str(body.get("model", ""))
    prompt = count_prompt_tokens(body)
    count, finish = _completion_count(body, knobs)
    if knobs.tools:
        count, finish = len(TOOL_ARGUMENT_PIECES), "tool_calls"
    usage = None if knobs.no_usage else _chat_usage(prompt, count)
    ident = f"chatcmpl-fake{fake.request_count}"
    if body.get("stream") is not True:
        message: dict[str, Any] = {"role": "assistant", "content": None, "refusal": None}
        if knobs.tools:
            message["tool_calls"] = [{"id": "call_fake1", "type": "function", "function": {
                "name": _tool_name(body), "arguments": "".join(TOOL_ARGUMENT_PIECES)}}]
        else:
            message["content"] = "".join(content_piece(i) for i in range(count))
        payload = {"id": ident, "object": "chat.completion", "created": CREATED,
                   "model": model, "choices": [{"index": 0, "message": message,
                                                "logprobs": None, "finish_reason": finish}]}
        if usage is not None:
            payload["usage"] = usage
        return fake._send_json(request, payload, knobs)
    include = bool((body.get("stream_options") or {}).get("include_usage"))
    plan = _Plan(knobs, b"text/event-stream; charset=utf-8")

    def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> bytes:
        payload: dict[str, Any] = {
            "id": ident, "object": "chat.completion.chunk", "created": CREATED, "model": model,
            "choices": [{"index": 0, "delta": delta, "logprobs": None,
                         "finish_reason": finish_reason}]}
        if include:
            payload["usage"] = None
        return _sse(payload)

    plan.add(chunk({"role": "assistant", "content": "" if not knobs.tools else None}))
    if knobs.tools:
        plan.add(chunk({"tool_calls": [{"index": 0, "id": "call_fake1", "type": "function",
                                        "function": {"name": _tool_name(body),
                                                     "arguments": ""}}]}))
        for piece in TOOL_ARGUMENT_PIECES:
            plan.add(chunk({"tool_calls": [{"index": 0, "function": {"arguments": piece}}]}),
                     content=True)
    else:
        for i in range(count):
            plan.add(chunk({"content": content_piece(i)}), content=True)
    plan.add(chunk({}, finish))
    if include and usage is not None:
        plan.add(_sse({"id": ident, "object": "chat.completion.chunk", "created": CREATED,
                       "model": model, "choices": [], "usage": usage}))
    plan.add(b"data: [DONE]\n\n")
    plan.error = _sse({"error": {"message": "fake upstream failed mid-stream",
                                 "type": "server_error", "param": None, "code": None}})
    return fake._send(request, plan)


def _completions(fake: FakeUpstream, request: Any, body: dict[str, Any], knobs: Knobs) -> Any:
    model = str(body.get("model", ""))
    count, finish = _completion_count(body, knobs)
    usage = None if knobs.no_usage else _chat_usage(count_prompt_tokens(body), count)
    ident = f"cmpl-fake{fake.request_count}"

    def shape(text: str, finish_reason: str | None) -> dict[str, Any]:
        return {"id": ident, "object": "text_completion", "created": CREATED, "model": model,
                "choices": [{"text": text, "index": 0, "logprobs": None,
                             "finish_reason": finish_reason}]}

    if body.get("stream") is not True:
        payload = shape("".join(content_piece(i) for i in range(count)), finish)
        if usage is not None:
            payload["usage"] = usage
        return fake._send_json(request, payload, knobs)
    plan = _Plan(knobs, b"text/event-stream; charset=utf-8")
    for i in range(count):
        plan.add(_sse(shape(content_piece(i), None)), content=True)
    plan.add(_sse(shape("", finish)))
    if (body.get("stream_options") or {}).get("include_usage") and usage is not None:
        plan.add(_sse({**shape("", None), "choices": [], "usage": usage}))
    plan.add(b"data: [DONE]\n\n")
    plan.error = _sse({"error": {"message": "fake upstream failed mid-stream",
                                 "type": "server_error", "param": None, "code": None}})
    return fake._send(request, plan)


def _responses(fake: FakeUpstream, request: Any, body: dict[str, Any], knobs: Knobs) -> Any:
    model = str(body.get("model", ""))
    prompt = count_prompt_tokens(body)
    count, finish = _completion_count(body, knobs)
    if knobs.tools:
        count = len(TOOL_ARGUMENT_PIECES)
    ident = f"resp_fake{fake.request_count}"
    usage = None if knobs.no_usage else {
        "input_tokens": prompt, "output_tokens": count, "total_tokens": prompt + count,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens_details": {"reasoning_tokens": 0}}
    text = "".join(content_piece(i) for i in range(count))
    if knobs.tools:
        item: dict[str, Any] = {"id": "fc_fake1", "type": "function_call", "status": "completed",
                                "call_id": "call_fake1", "name": _tool_name(body),
                                "arguments": "".join(TOOL_ARGUMENT_PIECES)}
    else:
        item = {"id": "msg_fake1", "type": "message", "status": "completed", "role": "assistant",
                "content": [{"type": "output_text", "text": text, "annotations": []}]}
    status = "completed" if finish == "stop" else "incomplete"

    def response(state: str, output: list[Any], with_usage: Any) -> dict[str, Any]:
        out = {"id": ident, "object": "response", "created_at": CREATED, "status": state,
               "model": model, "output": output, "usage": with_usage}
        if state == "incomplete":
            out["incomplete_details"] = {"reason": "max_output_tokens"}
        return out

    if body.get("stream") is not True:
        return fake._send_json(request, response(status, [item], usage), knobs)
    plan = _Plan(knobs, b"text/event-stream; charset=utf-8")
    seq = iter(range(1_000_000))

    def event(kind: str, **payload: Any) -> bytes:
        return _sse({"type": kind, "sequence_number": next(seq), **payload}, kind)

    plan.add(event("response.created", response=response("in_progress", [], None)))
    plan.add(event("response.in_progress", response=response("in_progress", [], None)))
    if knobs.tools:
        plan.add(event("response.output_item.added", output_index=0,
                       item={**item, "status": "in_progress", "arguments": ""}))
        for piece in TOOL_ARGUMENT_PIECES:
            plan.add(event("response.function_call_arguments.delta", item_id="fc_fake1",
                           output_index=0, delta=piece), content=True)
        plan.add(event("response.function_call_arguments.done", item_id="fc_fake1",
                       output_index=0, arguments=item["arguments"]))
    else:
        plan.add(event("response.output_item.added", output_index=0,
                       item={**item, "status": "in_progress", "content": []}))
        plan.add(event("response.content_part.added", item_id="msg_fake1", output_index=0,
                       content_index=0, part={"type": "output_text", "text": "",
                                              "annotations": []}))
        for i in range(count):
            plan.add(event("response.output_text.delta", item_id="msg_fake1", output_index=0,
                           content_index=0, delta=content_piece(i)), content=True)
        plan.add(event("response.output_text.done", item_id="msg_fake1", output_index=0,
                       content_index=0, text=text))
        plan.add(event("response.content_part.done", item_id="msg_fake1", output_index=0,
                       content_index=0, part=item["content"][0]))
    plan.add(event("response.output_item.done", output_index=0, item=item))
    plan.add(event("response.completed" if status == "completed" else "response.incomplete",
                   response=response(status, [item], usage)))
    plan.error = _sse({"type": "error", "code": "server_error",
                       "message": "fake upstream failed mid-stream", "param": None}, "error")
    return fake._send(request, plan)


def _moderations(fake: FakeUpstream, request: Any, body: dict[str, Any], knobs: Knobs) -> Any:
    inputs = body.get("input")
    count = len(inputs) if isinstance(inputs, list) else 1
    result = {"flagged": False, "categories": {"violence": False},
              "category_scores": {"violence": 0.0}}
    return fake._send_json(request, {"id": f"modr-fake{fake.request_count}",
                                     "model": body.get("model", ""),
                                     "results": [result] * count}, knobs)


def speech_bytes(text: str) -> bytes:
    """The audio the fake answers for ``input`` = text (64 bytes per input byte)."""
    return (b"ID3" + bytes(range(61))) * max(len(text.encode()), 1)


def _speech(fake: FakeUpstream, request: Any, body: dict[str, Any], knobs: Knobs) -> Any:
    audio = speech_bytes(str(body.get("input", "")))
    plan = _Plan(knobs, b"audio/mpeg")
    pieces = max(knobs.chunks, 1)
    step = -(-len(audio) // pieces)
    for start in range(0, len(audio), step):
        plan.add(audio[start:start + step], content=True)
    return fake._send(request, plan)


def _transcriptions(fake: FakeUpstream, request: Any, body: dict[str, Any],
                    knobs: Knobs) -> Any:
    size = len(body.get("file", b""))
    return fake._send_json(request, {"text": f"received {size} bytes",
                                     "usage": {"type": "duration",
                                               "seconds": max(size // 16000, 1)}}, knobs)


def _int(value: Any, default: int) -> int:
    try:
        return int(value.decode() if isinstance(value, bytes) else value)
    except (TypeError, ValueError):
        return default


def _images(fake: FakeUpstream, request: Any, body: dict[str, Any], knobs: Knobs) -> Any:
    n = _int(body.get("n"), 1)
    prompt = body.get("prompt", "")
    prompt = prompt.decode() if isinstance(prompt, bytes) else str(prompt)
    image_size = len(body.get("image", b"")) if isinstance(body.get("image"), bytes) else 0
    words = len(prompt.split())
    return fake._send_json(request, {
        "created": CREATED,
        "data": [{"b64_json": "iVBORw0KGgo=", "revised_prompt": prompt}] * n,
        "usage": {"input_tokens": words, "output_tokens": 1000 * n,
                  "total_tokens": words + 1000 * n,
                  "input_tokens_details": {"text_tokens": words,
                                           "image_tokens": image_size // 1000}},
    }, knobs)


def _models(fake: FakeUpstream, request: Any, body: dict[str, Any], knobs: Knobs) -> Any:
    return fake._send_json(request, {"object": "list", "data": [
        {"id": name, "object": "model", "created": CREATED, "owned_by": "fake"}
        for name in fake.models]}, knobs)


_ROUTES = {
    ("POST", "/v1/chat/completions"): _chat,
    ("POST", "/v1/completions"): _completions,
    ("POST", "/v1/responses"): _responses,
    ("POST", "/v1/moderations"): _moderations,
    ("POST", "/v1/audio/speech"): _speech,
    ("POST", "/v1/audio/transcriptions"): _transcriptions,
    ("POST", "/v1/images/generations"): _images,
    ("POST", "/v1/images/edits"): _images,
    ("GET", "/v1/models"): _models,
}


class _CountingFactory(WrappingFactory):
    """Tracks open connections (``protocols``) and counts every accepted one."""

    def __init__(self, wrapped: Any, fake: FakeUpstream) -> None:
        super().__init__(wrapped)
        self._fake = fake

    def registerProtocol(self, p: Any) -> None:
        self._fake.connections_made += 1
        super().registerProtocol(p)


