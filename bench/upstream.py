"""A standalone, fast OpenAI-compatible upstream for benchmarks (its own process).

It must never be the bottleneck, so it is a bare asyncio protocol with just enough HTTP/1.1:
keep-alive, ``Content-Length`` request bodies, ``Content-Length`` JSON answers and chunked SSE
answers.  ``POST /v1/chat/completions`` (and ``/v1/completions``) answer a fixed chat
completion, or an SSE stream when ``"stream": true``; ``GET /v1/models`` lists one model;
anything else is 404.

Stream length and pace come from the command line, and can be overridden per request by tokens
in the model name (joined with ``+``): ``chunks-<n>`` and ``pace-<seconds>`` — e.g. model
``bench+chunks-600+pace-0.1`` streams for about a minute.  ``rounds-<n>`` makes a
non-streamed answer a tool-calling one: a ``tasks_list`` call while the conversation holds
fewer than n-1 tool results, the fixed text after (an assistant run of exactly n model
rounds).  The gateway maps a public model to such an upstream model name, so one upstream
serves every benchmark phase.

A real model takes its time: ``--latency-ms`` holds every chat/completions answer (a stream's
first byte) that long, and ``--jitter-ms`` spreads the holds over latency +/- jitter (never
below 0: each call's hold is a hash of its conversation's last user message and number of tool
results, so a benchmark can compute it exactly, see ``jittered_hold_ms``); the knobs
``latency-<ms>`` and ``jitter-<ms>`` in the model name do the same per request. The hold is a
timer on the upstream's event loop, never a blocking sleep, so any number of held calls cost
nothing while they wait; requests pipelined behind a held one on the same connection wait their
turn. Default 0: no hold, the benches that never ask are unchanged.

    python bench/upstream.py --port 9100 [--chunks 20] [--pace 0.05] [--latency-ms 0]
                             [--jitter-ms 0]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import os
import re
import signal
import sys

import orjson

_KNOB = re.compile(rb"(chunks|pace)-([\d.]+)")
_ROUNDS = re.compile(r"rounds-(\d+)")
_HOLD = re.compile(rb"(latency|jitter)-([\d.]+)")
_MODEL = re.compile(rb'"model"\s*:\s*"([^"]*)"')
_CONTENT_LENGTH = re.compile(rb"\r\ncontent-length:[ \t]*(\d+)", re.IGNORECASE)
_CLOSE = re.compile(rb"\r\nconnection:[ \t]*close", re.IGNORECASE)
_USAGE = {"prompt_tokens": 10, "completion_tokens": 20, "total_tokens": 30}


def _json_answer(model: str) -> bytes:
    body = orjson.dumps({
        "id": "chatcmpl-bench", "object": "chat.completion", "created": 1_700_000_000,
        "model": model, "choices": [{"index": 0, "finish_reason": "stop", "message": {
            "role": "assistant", "content": "This is a benchmark answer of twenty tokens."}}],
        "usage": _USAGE})
    return (b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: "
            + str(len(body)).encode() + b"\r\n\r\n" + body)


def _tool_call_answer(model: str, call: int) -> bytes:
    body = orjson.dumps({
        "id": "chatcmpl-bench", "object": "chat.completion", "created": 1_700_000_000,
        "model": model, "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
            "role": "assistant", "content": None, "tool_calls": [{
                "id": f"call_{call}", "type": "function",
                "function": {"name": "tasks_list", "arguments": "{}"}}]}}],
        "usage": _USAGE})
    return (b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: "
            + str(len(body)).encode() + b"\r\n\r\n" + body)


def _rounds_left(request: dict, model: str) -> int | None:
    """With a ``rounds-<n>`` knob: the tool results the conversation still lacks."""
    match = _ROUNDS.search(model)
    if match is None:
        return None
    messages = request.get("messages") or []
    done = sum(1 for m in messages if isinstance(m, dict) and m.get("role") == "tool")
    return int(match.group(1)) - 1 - done


def _chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


_STREAM_HEAD = (b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                b"cache-control: no-cache\r\ntransfer-encoding: chunked\r\n\r\n")
_NOT_FOUND = (b"HTTP/1.1 404 Not Found\r\ncontent-type: application/json\r\n"
              b"content-length: 21\r\n\r\n{\"error\":\"not found\"}")
_MODELS_BODY = orjson.dumps({"object": "list", "data": [
    {"id": "bench", "object": "model", "created": 1_700_000_000, "owned_by": "bench"}]})
_MODELS = (b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: "
           + str(len(_MODELS_BODY)).encode() + b"\r\n\r\n" + _MODELS_BODY)


def jittered_hold_ms(latency_ms: float, jitter_ms: float, user_text: str,
                     tool_results: int) -> float:
    """The hold of one call: latency + jitter x u, u in [-1, 1) from a hash of the
    conversation's last user message and its number of tool results (never below 0).
    Deterministic, so a benchmark that knows what it sent knows each call's hold exactly,
    yet the calls of different conversations and rounds spread over the whole range."""
    if jitter_ms <= 0:
        return max(0.0, latency_ms)
    digest = hashlib.blake2b(f"{user_text}|{tool_results}".encode(), digest_size=8).digest()
    spread = int.from_bytes(digest, "big") / 2 ** 63 - 1
    return max(0.0, latency_ms + jitter_ms * spread)


def hold_seconds(body: bytes, latency_ms: float, jitter_ms: float) -> float:
    """How long to hold this request's answer: the defaults, or the model name's knobs."""
    if latency_ms <= 0 and b"latency-" not in body:
        return 0.0  # the common case: no knob, no hold, no parsing
    model = _MODEL.search(body)
    if model is not None:
        for name, value in _HOLD.findall(model.group(1)):
            if name == b"latency":
                latency_ms = float(value)
            else:
                jitter_ms = float(value)
    if jitter_ms <= 0:
        return max(0.0, latency_ms) / 1000
    try:
        request = orjson.loads(body)
    except orjson.JSONDecodeError:
        request = {}
    messages = request.get("messages") if isinstance(request, dict) else None
    messages = [m for m in messages or [] if isinstance(m, dict)]
    users = [m.get("content") for m in messages if m.get("role") == "user"]
    user_text = users[-1] if users and isinstance(users[-1], str) else ""
    tool_results = sum(1 for m in messages if m.get("role") == "tool")
    return jittered_hold_ms(latency_ms, jitter_ms, user_text, tool_results) / 1000


class Upstream(asyncio.Protocol):
    chunks = 20
    pace = 0.05
    latency_ms = 0.0
    jitter_ms = 0.0
    _json_cache: dict[str, bytes] = {}
    #: request body -> its fixed non-streamed answer (only those depend on nothing else)
    _answer_by_body: dict[bytes, bytes] = {}

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport: asyncio.Transport = transport  # type: ignore[assignment]
        self.buffer = b""
        self.streaming = False
        self.timer: asyncio.TimerHandle | None = None
        Upstream.open_connections += 1

    open_connections = 0

    def connection_lost(self, exc: Exception | None) -> None:
        Upstream.open_connections -= 1
        if self.timer is not None:
            self.timer.cancel()

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        while not self.streaming:
            end = self.buffer.find(b"\r\n\r\n")
            if end < 0:
                return
            head = self.buffer[:end]
            match = _CONTENT_LENGTH.search(head)
            length = int(match.group(1)) if match else 0
            total = end + 4 + length
            if len(self.buffer) < total:
                return
            body = self.buffer[end + 4:total]
            self.buffer = self.buffer[total:]
            self.handle(head, body)

    def handle(self, head: bytes, body: bytes) -> None:
        line = head[:head.find(b"\r\n")] if b"\r\n" in head else head
        method, _, rest = line.partition(b" ")
        path = rest.partition(b" ")[0]
        if method == b"POST" and path in (b"/v1/chat/completions", b"/v1/completions"):
            hold = hold_seconds(body, self.latency_ms, self.jitter_ms)
            if hold > 0:
                self.streaming = True  # requests pipelined behind this one wait their turn
                self.timer = asyncio.get_running_loop().call_later(
                    hold, self.held, head, body, method, path)
                return
        self.respond(head, body, method, path)

    def held(self, head: bytes, body: bytes, method: bytes, path: bytes) -> None:
        """A held request's time is up: answer it (unless the client has gone)."""
        self.timer = None
        if self.transport.is_closing():
            return
        self.streaming = False
        self.respond(head, body, method, path)
        if not self.streaming and self.buffer:
            self.data_received(b"")

    def respond(self, head: bytes, body: bytes, method: bytes, path: bytes) -> None:
        if method == b"GET" and path == b"/v1/models":
            self.transport.write(_MODELS)
        elif method == b"POST" and path in (b"/v1/chat/completions", b"/v1/completions"):
            known = self._answer_by_body.get(body)
            if known is not None:  # the same body as before: the same fixed answer
                self.transport.write(known)
            else:
                self.answer(body)
        else:
            self.transport.write(_NOT_FOUND)
        if _CLOSE.search(head) and not self.streaming:
            self.transport.close()

    def answer(self, body: bytes) -> None:
        try:
            request = orjson.loads(body) if body else {}
        except orjson.JSONDecodeError:
            request = {}
        if not isinstance(request, dict):
            request = {}
        model = str(request.get("model", "bench"))
        left = _rounds_left(request, model)
        if request.get("stream") is True:
            self.stream(request, model)
        elif left is not None and left > 0:
            self.transport.write(_tool_call_answer(model, left))
        else:
            answer = self._json_cache.get(model)
            if answer is None:
                answer = self._json_cache.setdefault(model, _json_answer(model))
            if len(self._answer_by_body) < 1024:
                # a benchmark sends one body over and over: no JSON parsing after the first
                self._answer_by_body[body] = answer
            self.transport.write(answer)

    def stream(self, request: dict, model: str) -> None:
        chunks, pace = self.chunks, self.pace
        for name, value in _KNOB.findall(model.encode()):
            if name == b"chunks":
                chunks = int(float(value))
            else:
                pace = float(value)
        self.prefix = (b'data: {"id":"chatcmpl-bench","object":"chat.completion.chunk",'
                       b'"model":' + orjson.dumps(model)
                       + b',"choices":[{"index":0,"delta":{"content":"')
        self.sent = 0
        self.total = chunks
        self.usage = bool((request.get("stream_options") or {}).get("include_usage"))
        self.streaming = True
        self.transport.write(_STREAM_HEAD)
        if pace <= 0:
            self.transport.write(b"".join(self.event(i) for i in range(chunks)) + self.tail())
            self.end_stream()
            return
        self.pace_value = pace
        self.next_event()

    def event(self, i: int) -> bytes:
        # generated when sent: a slow stream costs a counter, not a list of events
        return _chunk(self.prefix + b'tok%d "},"finish_reason":null}]}\n\n' % i)

    def tail(self) -> bytes:
        out = b""
        if self.usage:
            out += _chunk(b'data: {"id":"chatcmpl-bench","object":"chat.completion.chunk"'
                          b',"choices":[],"usage":' + orjson.dumps(
                              {"prompt_tokens": 10, "completion_tokens": self.total,
                               "total_tokens": 10 + self.total}) + b"}\n\n")
        return out + _chunk(b"data: [DONE]\n\n") + b"0\r\n\r\n"

    def next_event(self) -> None:
        self.timer = None
        if self.transport.is_closing():
            return
        self.transport.write(self.event(self.sent))
        self.sent += 1
        if self.sent < self.total:
            self.timer = asyncio.get_running_loop().call_later(self.pace_value, self.next_event)
        else:
            self.transport.write(self.tail())
            self.end_stream()

    def end_stream(self) -> None:
        self.streaming = False
        if self.buffer:
            self.data_received(b"")


async def serve(host: str, port: int, ready_file: str | None) -> None:
    loop = asyncio.get_running_loop()
    server = await loop.create_server(Upstream, host, port, backlog=4096, reuse_address=True)
    actual = server.sockets[0].getsockname()[1]
    print(f"bench upstream listening on http://{host}:{actual} (pid {os.getpid()})", flush=True)
    if ready_file:
        with open(ready_file, "w") as handle:
            handle.write(str(actual))
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stop.set)
    async with server:
        await stop.wait()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=9100)
    parser.add_argument("--chunks", type=int, default=20, help="SSE content chunks per stream")
    parser.add_argument("--pace", type=float, default=0.05, help="seconds between chunks")
    parser.add_argument("--latency-ms", type=float, default=0.0,
                        help="hold each chat/completions answer this long (a model's time)")
    parser.add_argument("--jitter-ms", type=float, default=0.0,
                        help="spread the holds over latency +/- jitter")
    parser.add_argument("--ready-file", help="write the bound port here once listening")
    args = parser.parse_args(argv)
    Upstream.chunks = args.chunks
    Upstream.pace = args.pace
    Upstream.latency_ms = args.latency_ms
    Upstream.jitter_ms = args.jitter_ms
    try:
        asyncio.run(serve(args.host, args.port, args.ready_file))
    except KeyboardInterrupt:
        sys.exit(0)


if __name__ == "__main__":
    main()
