"""A loopback OpenAI-compatible upstream whose chat answers are scripted turn by turn.

``ToolUpstream.start()`` listens on 127.0.0.1; ``script(*answers)`` queues answers for
``POST /v1/chat/completions``: ``text("...")``, ``tool_call(name, arguments, id)``,
``failure(status)`` or ``HANG`` (answers only on ``release()``, or fails at ``stop``).  When
the queue is empty the upstream answers ``Done: <last tool result>`` (or ``Done.``).  Usage is
reported exactly (prompt = whitespace-separated words of the request's texts, completion = 5),
so tests can check costs to the nano-unit.  Every request body is recorded.

A request with ``"stream": true`` gets the answer as OpenAI chat SSE, as a real upstream sends
it: a role chunk, the content one word per chunk, each tool call's id and name in its first
fragment and its arguments in ``ARGUMENT_PIECES`` fragments, a finish chunk, the usage chunk
when ``stream_options.include_usage`` asks, and ``[DONE]`` -- one chunk every ``chunk_delay``
seconds (real time, so each arrives in its own read).  ``stalled(text)`` streams ``text`` and
then hangs mid-stream (a stop's target); ``broken(text, message)`` streams ``text`` and then an
in-stream ``{"error": …}`` chunk and ``[DONE]``.
"""

from __future__ import annotations

import re
from collections import deque
from typing import Any

import orjson
from twisted.internet import reactor
from twisted.internet.defer import Deferred
from twisted.web.resource import Resource
from twisted.web.server import NOT_DONE_YET, Site

HANG = "hang"
COMPLETION_TOKENS = 5
#: a streamed tool call's arguments arrive in this many fragments
ARGUMENT_PIECES = 3


def text(content: str) -> dict[str, Any]:
    return {"content": content}


def tool_call(name: str, arguments: dict[str, Any] | str, call_id: str = "call_1"
              ) -> dict[str, Any]:
    raw = arguments if isinstance(arguments, str) else orjson.dumps(arguments).decode()
    return {"content": None, "tool_calls": [
        {"id": call_id, "type": "function", "function": {"name": name, "arguments": raw}}]}


def failure(status: int) -> dict[str, Any]:
    return {"status": status}


def stalled(content: str) -> dict[str, Any]:
    """Streamed: ``content`` arrives, then the stream hangs (no finish, no ``[DONE]``)."""
    return {"content": content, "stall": True}


def broken(content: str, message: str) -> dict[str, Any]:
    """Streamed: ``content`` arrives, then an error chunk with ``message`` ends the stream."""
    return {"content": content, "stream_error": message}


def words(content: str) -> list[str]:
    """``content`` cut as the streamed chunks carry it (each word with its trailing space)."""
    return re.findall(r"\S+\s*|\s+", content)


def pieces(text: str, count: int) -> list[str]:
    size = max(1, -(-len(text) // count))
    return [text[i:i + size] for i in range(0, len(text), size)] or [""]


def prompt_tokens(body: dict[str, Any]) -> int:
    words = 0
    for message in body.get("messages") or []:
        content = message.get("content")
        if isinstance(content, str):
            words += len(content.split())
    return max(1, words)


class ToolUpstream(Resource):
    isLeaf = True

    def __init__(self) -> None:
        super().__init__()
        self.answers: deque[Any] = deque()
        self.requests: list[dict[str, Any]] = []
        self.hanging: list[Any] = []
        self.hanging_bodies: list[dict[str, Any]] = []
        self.hung = Deferred[None]()
        #: fires when a ``stalled`` answer has sent its text
        self.stalled = Deferred[None]()
        #: every streamed answer's request, in order
        self.streams: list[Any] = []
        self.chunk_delay = 0.005
        self._port: Any = None

    @classmethod
    def start(cls) -> ToolUpstream:
        server = cls()
        server._port = reactor.listenTCP(0, Site(server), interface="127.0.0.1")
        return server

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._port.getHost().port}"

    def script(self, *answers: Any) -> None:
        self.answers.extend(answers)

    def stop(self) -> Any:
        for request in self.hanging:
            if not request.finished and not getattr(request, "_disconnected", False):
                request.setResponseCode(500)
                request.finish()
        return self._port.stopListening()

    def render_POST(self, request: Any) -> Any:
        body = orjson.loads(request.content.read())
        self.requests.append(body)
        answer = self.answers.popleft() if self.answers else None
        if answer == HANG:
            self.hanging.append(request)
            self.hanging_bodies.append(body)
            if not self.hung.called:
                self.hung.callback(None)
            return NOT_DONE_YET
        if body.get("stream") is True and not (answer is not None and "status" in answer):
            self._stream(request, body, answer)
            return NOT_DONE_YET
        return self._answer(request, body, answer)

    def release(self, answer: Any = None) -> None:
        """Answer the oldest hanging request now (``None``: the default answer)."""
        request, body = self.hanging.pop(0), self.hanging_bodies.pop(0)
        if body.get("stream") is True and not (answer is not None and "status" in answer):
            self._stream(request, body, answer)
            return
        request.write(self._answer(request, body, answer))
        request.finish()

    def _default(self, body: dict[str, Any]) -> dict[str, Any]:
        last_tool = [m for m in body.get("messages", []) if m.get("role") == "tool"]
        return text(f"Done: {last_tool[-1]['content']}" if last_tool else "Done.")

    def _stream(self, request: Any, body: dict[str, Any], answer: Any) -> None:
        self.streams.append(request)
        request.setHeader(b"content-type", b"text/event-stream")
        answer = answer or self._default(body)
        head = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1,
                "model": body.get("model")}

        def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
            return b"data: " + orjson.dumps({**head, "choices": [
                {"index": 0, "delta": delta, "finish_reason": finish}]}) + b"\n\n"

        frames = [chunk({"role": "assistant", "content": ""})]
        frames += [chunk({"content": word}) for word in words(answer.get("content") or "")]
        for index, call in enumerate(answer.get("tool_calls") or []):
            function = call["function"]
            for number, argument in enumerate(pieces(function["arguments"], ARGUMENT_PIECES)):
                fragment: dict[str, Any] = {"index": index, "function": {"arguments": argument}}
                if number == 0:
                    fragment.update(id=call["id"], type="function")
                    fragment["function"]["name"] = function["name"]
                frames.append(chunk({"tool_calls": [fragment]}))
        if answer.get("stall"):
            self.hanging.append(request)
            self.hanging_bodies.append(body)
        elif answer.get("stream_error"):
            error = {"message": answer["stream_error"], "type": "upstream_error"}
            frames += [b"data: " + orjson.dumps({"error": error}) + b"\n\n",
                       b"data: [DONE]\n\n"]
        else:
            frames.append(chunk({}, "tool_calls" if answer.get("tool_calls") else "stop"))
            if (body.get("stream_options") or {}).get("include_usage"):
                usage = {"prompt_tokens": prompt_tokens(body),
                         "completion_tokens": COMPLETION_TOKENS,
                         "total_tokens": prompt_tokens(body) + COMPLETION_TOKENS}
                frames.append(b"data: " + orjson.dumps({**head, "choices": [], "usage": usage})
                              + b"\n\n")
            frames.append(b"data: [DONE]\n\n")
        self._send(request, frames, bool(answer.get("stall")))

    def _send(self, request: Any, frames: list[bytes], stall: bool) -> None:
        if getattr(request, "_disconnected", False):
            return
        if not frames:
            if stall:
                if not self.stalled.called:
                    self.stalled.callback(None)
            else:
                request.finish()
            return
        request.write(frames[0])
        reactor.callLater(self.chunk_delay, self._send, request, frames[1:], stall)

    def _answer(self, request: Any, body: dict[str, Any], answer: Any) -> bytes:
        request.setHeader(b"content-type", b"application/json")
        if answer is not None and "status" in answer:
            request.setResponseCode(answer["status"])
            return orjson.dumps({"error": {"message": "scripted failure", "type": "x"}})
        if answer is None:
            answer = self._default(body)
        message = {"role": "assistant", **answer}
        return orjson.dumps({
            "id": "chatcmpl-1", "object": "chat.completion", "created": 1,
            "model": body.get("model"),
            "choices": [{"index": 0, "message": message,
                         "finish_reason": "tool_calls" if answer.get("tool_calls") else "stop"}],
            "usage": {"prompt_tokens": prompt_tokens(body), "completion_tokens": COMPLETION_TOKENS,
                      "total_tokens": prompt_tokens(body) + COMPLETION_TOKENS}})
