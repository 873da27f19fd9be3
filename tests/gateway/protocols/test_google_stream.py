"""Google ``alt=sse`` streams converted event by event (§9.4), both directions.

Text is relayed chunk by chunk; function calls go out whole in the closing chunk with
``finishReason`` and ``usageMetadata`` (Google streams no arguments).  Every chunk written for
a Google client is validated with the google-genai SDK's response model.
"""

from __future__ import annotations

from typing import Any

import orjson
from google.genai import types

from gateway.billing.usage import Usage
from gateway.protocols.sse import SSEEvent, SSEParser
from gateway.protocols.translate import make_translator
from tests.gateway.protocols.recorded import frames_to_events
from tests.gateway.protocols.test_google import google_request
from tests.gateway.protocols.test_messages import client_request
from tests.gateway.protocols.test_messages_stream import RECORDED_STREAM, _accumulate


def sse(raw: bytes) -> list[SSEEvent]:
    return SSEParser().feed(raw)


def chunk(parts: list[dict[str, Any]], finish: str | None = None,
          usage: dict[str, Any] | None = None) -> bytes:
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": parts}, "index": 0}
    if finish:
        candidate["finishReason"] = finish
    body: dict[str, Any] = {"candidates": [candidate], "modelVersion": "gemini-up",
                            "responseId": "r1"}
    if usage:
        body["usageMetadata"] = usage
    return b"data: " + orjson.dumps(body) + b"\r\n\r\n"


USAGE = {"promptTokenCount": 10, "candidatesTokenCount": 4, "thoughtsTokenCount": 6,
         "totalTokenCount": 20}
RECORDED_STREAM_GOOGLE = b"".join([
    chunk([{"text": "Hel"}], usage={"promptTokenCount": 10, "totalTokenCount": 10}),
    chunk([{"text": "pondering", "thought": True}]),
    chunk([{"text": "lo"}]),
    chunk([{"functionCall": {"name": "lookup", "args": {"q": "x"}}}], "STOP", USAGE),
])


def test_google_upstream_to_chat_client() -> None:
    translator = make_translator("chat", "modelaction", client_request("chat", {
        "model": "client", "stream": True, "stream_options": {"include_usage": True},
        "messages": [{"role": "user", "content": "hi"}]}, stream=True), "gemini-up")
    chunks: list[Any] = []
    for position, event in enumerate(sse(RECORDED_STREAM_GOOGLE)):
        frames = translator.stream_event(event)
        if position in (0, 2):
            assert frames, "text must be relayed at once"
        chunks.extend(e.data for e in frames_to_events(frames))
    assert translator.completed
    assert translator.usage == Usage(input=10, output=10, reasoning=6)
    assert chunks[-1] == b"[DONE]"
    parsed = [orjson.loads(c) for c in chunks[:-1]]
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in parsed
                   if c["choices"])
    assert text == "Hello"
    calls = [tc for c in parsed if c["choices"]
             for tc in c["choices"][0]["delta"].get("tool_calls") or ()]
    assert calls[0]["function"]["name"] == "lookup"
    assert "".join(tc["function"]["arguments"] for tc in calls) == '{"q":"x"}'
    assert [c["choices"][0]["finish_reason"] for c in parsed if c["choices"]][-1] == \
        "tool_calls"
    assert parsed[-1]["usage"]["completion_tokens"] == 10


def _google_client_chunks(upstream: str, raw: bytes) -> tuple[Any, list[dict[str, Any]]]:
    translator = make_translator("google", upstream, google_request(
        {"contents": [{"parts": [{"text": "hi"}]}]}, stream=True), "up")
    out: list[dict[str, Any]] = []
    for event in sse(raw):
        for frame in frames_to_events(translator.stream_event(event)):
            out.append(orjson.loads(frame.data))
    for frame in frames_to_events(translator.finish()):
        out.append(orjson.loads(frame.data))
    return translator, out


def test_messages_upstream_to_google_client() -> None:
    translator, out = _google_client_chunks("messages", RECORDED_STREAM)
    responses = [types.GenerateContentResponse.model_validate(c) for c in out]
    assert "".join(r.text or "" for r in responses[:-1]) == "Hello there"
    last = responses[-1]
    assert last.candidates[0].finish_reason == types.FinishReason.STOP  # type: ignore[index]
    call = last.function_calls[0]  # type: ignore[index]
    assert call.name == "lookup" and call.args == {"q": "x"} and call.id == "toolu_9"
    assert last.usage_metadata.prompt_token_count == 75  # type: ignore[union-attr]
    assert last.usage_metadata.cached_content_token_count == 50  # type: ignore[union-attr]
    assert all(r.model_version == "gemini-client" for r in responses)
    assert translator.usage == Usage(input=75, output=17, cache_read=50)
    assert translator.completed


def test_google_stream_to_messages_client_rebuilds_one_message() -> None:
    translator = make_translator("messages", "modelaction", client_request("messages", {
        "model": "claude-client", "max_tokens": 5, "stream": True,
        "messages": [{"role": "user", "content": "hi"}]}, stream=True), "gemini-up")
    payloads: list[dict[str, Any]] = []
    for event in sse(RECORDED_STREAM_GOOGLE):
        payloads.extend(orjson.loads(f.data) for f in frames_to_events(
            translator.stream_event(event)))
    assert translator.finish() == []
    message = _accumulate(payloads)
    text, thought, more, call = message.content  # the thought part sits between the texts
    assert text.type == "text" and more.type == "text" and text.text + more.text == "Hello"
    assert thought.type == "thinking" and thought.thinking == "pondering"
    assert call.type == "tool_use" and call.input == {"q": "x"}
    assert message.stop_reason == "tool_use"
    assert message.usage.output_tokens == 10 and message.usage.input_tokens == 10


def test_passthrough_stream_and_errors() -> None:
    translator, out = _google_client_chunks("modelaction", RECORDED_STREAM_GOOGLE)
    assert len(out) == 4 and all(c["modelVersion"] == "gemini-client" for c in out)
    assert out[1]["candidates"][0]["content"]["parts"][0]["thought"] is True
    assert translator.completed and translator.usage == Usage(input=10, output=10, reasoning=6)
    broken, frames = _google_client_chunks("modelaction", chunk([{"text": "a"}]) + (
        b'data: {"error": {"code": 503, "message": "overloaded", "status": "UNAVAILABLE"}}\n\n'))
    assert not broken.completed and frames[-1]["error"]["status"] == "UNAVAILABLE"
    cut = make_translator("google", "compat", google_request(
        {"contents": [{"parts": [{"text": "hi"}]}]}, stream=True), "gpt")
    cut.stream_event(sse(b'data: {"id":"c","object":"chat.completion.chunk","created":1,'
                         b'"model":"u","choices":[{"index":0,"delta":{"content":"x"}}]}\n\n')[0])
    error = [orjson.loads(f.data) for f in frames_to_events(
        cut.error_frames("Upstream stream failed", "upstream_error", "upstream_error"))]
    assert error == [{"error": {"code": 502, "message": "Upstream stream failed",
                                "status": "UNAVAILABLE"}}]
    assert not cut.completed
