"""Messages streams converted event by event (§9.4), both directions, with exact usage.

Every upstream event is fed on its own and its frames are checked at once; every Messages
frame we write is validated against the official SDK's stream event models, and the SDK's own
accumulator rebuilds the final message from them.
"""

from __future__ import annotations

from typing import Any

import orjson
from anthropic.types import Message, RawMessageStreamEvent
from pydantic import TypeAdapter

from gateway.billing.usage import Usage
from gateway.protocols.sse import SSEEvent, SSEParser
from gateway.protocols.translate import make_translator
from tests.gateway.protocols.recorded import frames_to_events
from tests.gateway.protocols.test_messages import client_request

EVENT = TypeAdapter(RawMessageStreamEvent)


def sse(raw: bytes) -> list[SSEEvent]:
    return SSEParser().feed(raw)


#: a Messages stream as the API sends it: text, then a tool call, usage split in two
RECORDED_STREAM = b"".join(
    b"event: " + name.encode() + b"\ndata: " + orjson.dumps(payload) + b"\n\n"
    for name, payload in [
        ("message_start", {"type": "message_start", "message": {
            "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-up",
            "content": [], "stop_reason": None, "stop_sequence": None,
            "usage": {"input_tokens": 25, "cache_read_input_tokens": 50,
                      "cache_creation_input_tokens": 0, "output_tokens": 1}}}),
        ("ping", {"type": "ping"}),
        ("content_block_start", {"type": "content_block_start", "index": 0,
                                 "content_block": {"type": "text", "text": ""}}),
        ("content_block_delta", {"type": "content_block_delta", "index": 0,
                                 "delta": {"type": "text_delta", "text": "Hello"}}),
        ("content_block_delta", {"type": "content_block_delta", "index": 0,
                                 "delta": {"type": "text_delta", "text": " there"}}),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        ("content_block_start", {"type": "content_block_start", "index": 1,
                                 "content_block": {"type": "tool_use", "id": "toolu_9",
                                                   "name": "lookup", "input": {}}}),
        ("content_block_delta", {"type": "content_block_delta", "index": 1,
                                 "delta": {"type": "input_json_delta",
                                           "partial_json": '{"q": '}}),
        ("content_block_delta", {"type": "content_block_delta", "index": 1,
                                 "delta": {"type": "input_json_delta",
                                           "partial_json": '"x"}'}}),
        ("content_block_stop", {"type": "content_block_stop", "index": 1}),
        ("message_delta", {"type": "message_delta",
                           "delta": {"stop_reason": "tool_use", "stop_sequence": None},
                           "usage": {"output_tokens": 17}}),
        ("message_stop", {"type": "message_stop"}),
    ])
EXPECTED_USAGE = Usage(input=75, output=17, cache_read=50)


def test_messages_upstream_to_chat_client_event_by_event() -> None:
    translator = make_translator("chat", "messages", client_request("chat", {
        "model": "client", "stream": True, "stream_options": {"include_usage": True},
        "messages": [{"role": "user", "content": "hi"}]}, stream=True), "claude-up")
    chunks: list[Any] = []
    for event in sse(RECORDED_STREAM):
        frames = translator.stream_event(event)
        if event.event == "content_block_delta":
            assert frames, "a delta must be relayed at once"
        chunks.extend(e.data for e in frames_to_events(frames))
    assert translator.completed and translator.usage == EXPECTED_USAGE
    assert translator.finish() == []
    assert chunks[-1] == b"[DONE]"
    parsed = [orjson.loads(c) for c in chunks[:-1]]
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in parsed
                   if c["choices"])
    assert text == "Hello there"
    calls = [tc for c in parsed if c["choices"] for tc in c["choices"][0]["delta"].get(
        "tool_calls") or ()]
    assert calls[0]["id"] == "toolu_9" and calls[0]["function"]["name"] == "lookup"
    assert "".join(tc["function"]["arguments"] for tc in calls) == '{"q": "x"}'
    finishes = [c["choices"][0]["finish_reason"] for c in parsed if c["choices"]]
    assert finishes[-1] == "tool_calls"
    assert parsed[-1]["usage"]["prompt_tokens"] == 75
    assert parsed[-1]["usage"]["prompt_tokens_details"]["cached_tokens"] == 50


def _messages_client_frames(upstream: str, events: list[SSEEvent]) -> tuple[Any, list[dict]]:
    translator = make_translator("messages", upstream, client_request("messages", {
        "model": "claude-client", "max_tokens": 50, "stream": True,
        "messages": [{"role": "user", "content": "hi"}]}, stream=True), "up")
    payloads: list[dict] = []
    for event in events:
        for frame in frames_to_events(translator.stream_event(event)):
            payload = orjson.loads(frame.data)
            assert frame.event == payload["type"]
            payloads.append(payload)
    for frame in frames_to_events(translator.finish()):
        payloads.append(orjson.loads(frame.data))
    return translator, payloads


def _accumulate(payloads: list[dict]) -> Message:
    """The final message, rebuilt as the SDK's stream helper does (each event validated)."""
    message: dict[str, Any] = {}
    arguments: dict[int, str] = {}
    for payload in payloads:
        EVENT.validate_python(payload)
        kind = payload["type"]
        if kind == "message_start":
            message = dict(payload["message"])
        elif kind == "content_block_start":
            assert payload["index"] == len(message["content"])
            message["content"].append(dict(payload["content_block"]))
        elif kind == "content_block_delta":
            delta, block = payload["delta"], message["content"][payload["index"]]
            if delta["type"] == "text_delta":
                block["text"] += delta["text"]
            elif delta["type"] == "thinking_delta":
                block["thinking"] += delta["thinking"]
            elif delta["type"] == "signature_delta":
                block["signature"] = delta["signature"]
            else:
                arguments[payload["index"]] = arguments.get(payload["index"], "") \
                    + delta["partial_json"]
        elif kind == "content_block_stop" and payload["index"] in arguments:
            message["content"][payload["index"]]["input"] = orjson.loads(
                arguments[payload["index"]])
        elif kind == "message_delta":
            message.update(payload["delta"])
            message["usage"] = {**message["usage"], **payload["usage"]}
    return Message.model_validate(message)


def test_chat_upstream_to_messages_client() -> None:
    chat_stream = b"".join(b"data: " + orjson.dumps(c) + b"\n\n" for c in [
        {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "up",
         "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]},
        {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "up",
         "choices": [{"index": 0, "delta": {"content": "Hi"}}]},
        {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "up",
         "choices": [{"index": 0, "delta": {"tool_calls": [
             {"index": 0, "id": "call_1", "type": "function",
              "function": {"name": "f", "arguments": ""}}]}}]},
        {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "up",
         "choices": [{"index": 0, "delta": {"tool_calls": [
             {"index": 0, "function": {"arguments": '{"a":1}'}}]}}]},
        {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "up",
         "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]},
        {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "up",
         "choices": [], "usage": {"prompt_tokens": 9, "completion_tokens": 4,
                                  "total_tokens": 13,
                                  "prompt_tokens_details": {"cached_tokens": 3}}},
    ]) + b"data: [DONE]\n\n"
    translator, payloads = _messages_client_frames("compat", sse(chat_stream))
    kinds = [p["type"] for p in payloads]
    assert kinds[0] == "message_start" and kinds[-2:] == ["message_delta", "message_stop"]
    assert kinds.count("content_block_start") == 2
    assert kinds.count("content_block_stop") == 2
    message = _accumulate(payloads)
    assert message.model == "claude-client" and message.stop_reason == "tool_use"
    text, call = message.content
    assert text.type == "text" and text.text == "Hi"
    assert call.type == "tool_use" and call.name == "f" and call.input == {"a": 1}
    assert message.usage.output_tokens == 4 and message.usage.cache_read_input_tokens == 3
    assert message.usage.input_tokens == 6
    assert translator.usage == Usage(input=9, output=4, cache_read=3)
    assert translator.completed


def test_passthrough_stream_reads_split_usage_and_keeps_bytes() -> None:
    translator = make_translator("messages", "messages", client_request("messages", {
        "model": "claude-client", "max_tokens": 50, "stream": True,
        "messages": [{"role": "user", "content": "hi"}]}, stream=True), "claude-up")
    out: list[bytes] = []
    for event in sse(RECORDED_STREAM):
        out.extend(translator.stream_event(event))
    assert translator.completed and translator.usage == EXPECTED_USAGE
    relayed = frames_to_events(out)
    assert len(relayed) == 12
    start = orjson.loads(relayed[0].data)
    assert start["message"]["model"] == "claude-client"
    assert [e.data for e in relayed[1:]] == [e.data for e in sse(RECORDED_STREAM)[1:]]
    assert translator.relayed_text_tokens() > 0


def test_upstream_error_event_becomes_one_native_error() -> None:
    stream = sse(RECORDED_STREAM)[:4] + sse(
        b'event: error\ndata: {"type":"error","error":{"type":"overloaded_error",'
        b'"message":"Overloaded"}}\n\n')
    translator, payloads = _messages_client_frames("messages", stream)
    assert not translator.completed
    assert payloads[-1] == {"type": "error", "error": {"type": "overloaded_error",
                                                       "message": "Overloaded"}}
    converted, frames = _messages_client_frames("compat", sse(
        b'data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"u",'
        b'"choices":[{"index":0,"delta":{"content":"x"}}]}\n\n'
        b'data: {"error":{"message":"boom","type":"server_error"}}\n\n'))
    assert not converted.completed
    assert frames[-1] == {"type": "error", "error": {"type": "api_error", "message": "boom"}}
    assert converted.error_frames("late", "upstream_error", None) == []
