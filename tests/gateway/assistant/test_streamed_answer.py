"""Reading one OpenAI chat SSE stream into a round's answer (``gateway.assistant.streamed_answer``):
deltas as they arrive, tool calls merged by index, usage, the in-stream error, and bytes split
anywhere across network reads."""

from __future__ import annotations

from typing import Any

import orjson
from twisted.trial.unittest import TestCase

from gateway.assistant.streamed_answer import StreamedAnswer


def chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> bytes:
    body = {"id": "c", "object": "chat.completion.chunk",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}], **extra}
    return b"data: " + orjson.dumps(body) + b"\n\n"


def call(index: int, *, arguments: str, id: str = "", name: str = "") -> dict[str, Any]:
    fragment: dict[str, Any] = {"index": index, "function": {"arguments": arguments}}
    if id:
        fragment.update(id=id, type="function")
        fragment["function"]["name"] = name
    return {"tool_calls": [fragment]}


STREAM = b"".join([
    chunk({"role": "assistant", "content": ""}),
    chunk({"content": "Checking "}),
    chunk({"content": "both."}),
    chunk(call(0, id="call_a", name="read", arguments='{"pa')),
    chunk(call(1, id="call_b", name="list", arguments="")),
    chunk(call(0, arguments='th": "a.txt"}')),
    chunk(call(1, arguments="{}")),
    chunk({}, "tool_calls"),
    b'data: {"id":"c","choices":[],"usage":{"prompt_tokens":7,"completion_tokens":3}}\n\n',
    b": ping\n\n",
    b"data: [DONE]\n\n",
])


class StreamedAnswerTests(TestCase):
    def test_deltas_come_as_fed_and_the_answer_is_assembled(self) -> None:
        deltas: list[str] = []
        answer = StreamedAnswer(deltas.append)
        answer.feed(STREAM)
        assert deltas == ["Checking ", "both."]
        assert answer.completed and answer.error is None and answer.delivered_text
        assert answer.body() == {
            "object": "chat.completion",
            "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
                "role": "assistant", "content": "Checking both.",
                "tool_calls": [
                    {"id": "call_a", "type": "function",
                     "function": {"name": "read", "arguments": '{"path": "a.txt"}'}},
                    {"id": "call_b", "type": "function",
                     "function": {"name": "list", "arguments": "{}"}}]}}],
            "usage": {"prompt_tokens": 7, "completion_tokens": 3}}

    def test_bytes_split_anywhere_give_the_same_answer(self) -> None:
        whole = StreamedAnswer()
        whole.feed(STREAM)
        for size in (1, 3, 17):
            deltas: list[str] = []
            pieces = StreamedAnswer(deltas.append)
            for start in range(0, len(STREAM), size):
                pieces.feed(STREAM[start:start + size])
            assert pieces.body() == whole.body(), size
            assert deltas == ["Checking ", "both."]

    def test_an_error_chunk_is_the_rounds_error(self) -> None:
        answer = StreamedAnswer()
        answer.feed(chunk({"content": "par"}) + b'data: {"error": {"message": "Upstream '
                    b'stream failed", "type": "upstream_error"}}\n\ndata: [DONE]\n\n')
        assert answer.error == "Upstream stream failed"
        assert answer.content == "par"

    def test_a_text_only_stream_finishes_with_stop(self) -> None:
        answer = StreamedAnswer()
        answer.feed(chunk({"content": "Hi"}) + b"data: [DONE]\n\n")
        [choice] = answer.body()["choices"]
        assert choice["finish_reason"] == "stop"
        assert choice["message"] == {"role": "assistant", "content": "Hi"}
        assert "usage" not in answer.body()

    def test_an_unterminated_stream_is_not_completed(self) -> None:
        answer = StreamedAnswer()
        answer.feed(chunk({"content": "Hi"}))
        assert not answer.completed and answer.error is None
