"""A loopback OpenAI-compatible upstream whose chat answers are scripted turn by turn.

``ToolUpstream.start()`` listens on 127.0.0.1; ``script(*answers)`` queues answers for
``POST /v1/chat/completions``: ``text("...")``, ``tool_call(name, arguments, id)``,
``failure(status)`` or ``HANG`` (answers only on ``release()``, or fails at ``stop``).  When
the queue is empty the upstream answers ``Done: <last tool result>`` (or ``Done.``).  Usage is
reported exactly (prompt = whitespace-separated words of the request's texts, completion = 5),
so tests can check costs to the nano-unit.  Every request body is recorded.
"""

from __future__ import annotations

from collections import deque
from typing import Any

import orjson
from twisted.internet import reactor
from twisted.internet.defer import Deferred
from twisted.web.resource import Resource
from twisted.web.server import NOT_DONE_YET, Site

HANG = "hang"
COMPLETION_TOKENS = 5


def text(content: str) -> dict[str, Any]:
    return {"content": content}


def tool_call(name: str, arguments: dict[str, Any] | str, call_id: str = "call_1"
              ) -> dict[str, Any]:
    raw = arguments if isinstance(arguments, str) else orjson.dumps(arguments).decode()
    return {"content": None, "tool_calls": [
        {"id": call_id, "type": "function", "function": {"name": name, "arguments": raw}}]}


def failure(status: int) -> dict[str, Any]:
    return {"status": status}


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
        return self._answer(request, body, answer)

    def release(self, answer: Any = None) -> None:
        """Answer the oldest hanging request now (``None``: the default answer)."""
        request, body = self.hanging.pop(0), self.hanging_bodies.pop(0)
        request.write(self._answer(request, body, answer))
        request.finish()

    def _answer(self, request: Any, body: dict[str, Any], answer: Any) -> bytes:
        request.setHeader(b"content-type", b"application/json")
        if answer is not None and "status" in answer:
            request.setResponseCode(answer["status"])
            return orjson.dumps({"error": {"message": "scripted failure", "type": "x"}})
        if answer is None:
            last_tool = [m for m in body.get("messages", []) if m.get("role") == "tool"]
            answer = text(f"Done: {last_tool[-1]['content']}" if last_tool else "Done.")
        message = {"role": "assistant", **answer}
        return orjson.dumps({
            "id": "chatcmpl-1", "object": "chat.completion", "created": 1,
            "model": body.get("model"),
            "choices": [{"index": 0, "message": message,
                         "finish_reason": "tool_calls" if answer.get("tool_calls") else "stop"}],
            "usage": {"prompt_tokens": prompt_tokens(body), "completion_tokens": COMPLETION_TOKENS,
                      "total_tokens": prompt_tokens(body) + COMPLETION_TOKENS}})
