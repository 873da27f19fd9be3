"""One streamed model round read as it arrives (agents contract §1.7 ``text``, §1.8 step 7).

Why here and not in the gateway: with ``stream=true`` a round is an ordinary streamed /v1 call
(``InternalStreamedChat``): the gateway routes, fails over, reserves and settles it as for any
client, and what it writes is the OpenAI chat SSE a client would read.  This module is that
client.  ``StreamedAnswer.feed`` parses the bytes incrementally (the gateway's own SSE parser),
hands every content delta to ``on_delta`` the moment its chunk arrives, and assembles the round's
answer the way an SDK does: content joined, ``tool_calls`` merged by ``index`` (id and name from
the first fragment that has them, argument fragments concatenated), the finish reason and the
usage chunk.  An in-stream ``{"error": …}`` chunk (the gateway's error frame after the stream
started) becomes the round's error.  ``body()`` is the assembled answer in the non-streamed
``chat.completion`` shape, so the loop reads both kinds of round alike.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson

from gateway.protocols.sse import SSEError, SSEParser

#: receives each content delta as it arrives
DeltaHandler = Callable[[str], None]


class _ToolCall:
    __slots__ = ("arguments", "id", "name", "type")

    def __init__(self) -> None:
        self.id = ""
        self.type = "function"
        self.name = ""
        self.arguments: list[str] = []

    def merge(self, fragment: dict[str, Any]) -> None:
        if isinstance(fragment.get("id"), str) and fragment["id"] and not self.id:
            self.id = fragment["id"]
        if isinstance(fragment.get("type"), str) and fragment["type"]:
            self.type = fragment["type"]
        function = fragment.get("function")
        if isinstance(function, dict):
            name = function.get("name")
            if isinstance(name, str) and name and not self.name:
                self.name = name
            arguments = function.get("arguments")
            if isinstance(arguments, str):
                self.arguments.append(arguments)

    def message(self) -> dict[str, Any]:
        return {"id": self.id, "type": self.type,
                "function": {"name": self.name, "arguments": "".join(self.arguments)}}


class StreamedAnswer:
    """Feed it the SSE bytes of one chat completion stream; read the assembled answer."""

    def __init__(self, on_delta: DeltaHandler | None = None) -> None:
        self._on_delta = on_delta
        self._parser = SSEParser()
        self._content: list[str] = []
        self._calls: dict[int, _ToolCall] = {}
        self.finish_reason: str | None = None
        self.usage: dict[str, Any] | None = None
        #: the stream's ``[DONE]`` arrived
        self.completed = False
        #: the message of an in-stream error chunk (or of bytes that are not a chat stream)
        self.error: str | None = None
        #: some content reached ``on_delta`` (a retry would repeat it: §1.8 step 7)
        self.delivered_text = False

    @property
    def content(self) -> str:
        return "".join(self._content)

    def feed(self, data: bytes) -> None:
        try:
            events = self._parser.feed(data)
        except SSEError as exc:
            self.error = self.error or f"Failed to parse upstream stream: {exc}"
            return
        for event in events:
            self._event(event.data)

    def _event(self, data: bytes) -> None:
        if data.strip() == b"[DONE]":
            self.completed = True
            return
        try:
            chunk = orjson.loads(data)
        except orjson.JSONDecodeError:
            return  # not a chunk (a comment-like line): a client skips it
        if not isinstance(chunk, dict):
            return
        error = chunk.get("error")
        if error is not None:
            message = error.get("message") if isinstance(error, dict) else error
            self.error = str(message or "Upstream stream failed")
            return
        usage = chunk.get("usage")
        if isinstance(usage, dict):
            self.usage = usage
        choices = chunk.get("choices")
        if not isinstance(choices, list):
            return
        for choice in choices:
            if isinstance(choice, dict) and choice.get("index", 0) == 0:
                self._choice(choice)

    def _choice(self, choice: dict[str, Any]) -> None:
        reason = choice.get("finish_reason")
        if isinstance(reason, str) and reason:
            self.finish_reason = reason
        delta = choice.get("delta")
        if not isinstance(delta, dict):
            return
        text = delta.get("content")
        if isinstance(text, str) and text:
            self._content.append(text)
            self.delivered_text = True
            if self._on_delta is not None:
                self._on_delta(text)
        calls = delta.get("tool_calls")
        if isinstance(calls, list):
            for fragment in calls:
                if isinstance(fragment, dict):
                    index = fragment.get("index", 0)
                    key = index if isinstance(index, int) else 0
                    self._calls.setdefault(key, _ToolCall()).merge(fragment)

    def body(self) -> dict[str, Any]:
        """The assembled answer as a non-streamed ``chat.completion`` body."""
        message: dict[str, Any] = {"role": "assistant", "content": self.content or None}
        if self._calls:
            message["tool_calls"] = [self._calls[index].message()
                                     for index in sorted(self._calls)]
        answer: dict[str, Any] = {
            "object": "chat.completion",
            "choices": [{"index": 0, "message": message,
                         "finish_reason": self.finish_reason
                         or ("tool_calls" if self._calls else "stop")}]}
        if self.usage is not None:
            answer["usage"] = self.usage
        return answer
