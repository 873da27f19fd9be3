"""Streamed chat <-> Responses conversion (§9.4), event by event.

Every upstream event is fed on its own and its frames are checked at once (a translator that
buffered the stream would produce nothing until the end and fail these tests).  Every frame is
validated against the official SDK's event models.
"""

from __future__ import annotations

import orjson
import pytest
from openai.types import Completion
from openai.types.chat import ChatCompletionChunk
from openai.types.responses import ResponseStreamEvent
from pydantic import TypeAdapter

from gateway.billing.usage import Usage
from gateway.protocols.request import parse_client_request
from gateway.protocols.sse import SSEEvent
from gateway.protocols.translate import make_translator
from tests.gateway.protocols.recorded import frames_to_events, load_sse, payloads

RESPONSES_EVENT = TypeAdapter(ResponseStreamEvent)


def responses_client(**extra):
    body = {"model": "client-model", "input": "hi", "stream": True, **extra}
    return make_translator("responses", "compat",
                           parse_client_request("responses", orjson.dumps(body)), "gpt-4o")


def chat_client(include_usage: bool | None = None):
    body: dict = {"model": "client-model", "stream": True,
                  "messages": [{"role": "user", "content": "hi"}]}
    if include_usage is not None:
        body["stream_options"] = {"include_usage": include_usage}
    return make_translator("chat", "responses",
                           parse_client_request("chat", orjson.dumps(body)), "gpt-4.1")


def check_responses_frames(frames: list[bytes]) -> list[dict]:
    events = []
    for sse in frames_to_events(frames):
        payload = orjson.loads(sse.data)
        assert sse.event == payload["type"]
        RESPONSES_EVENT.validate_python(payload)
        events.append(payload)
    return events


def test_chat_upstream_text_to_responses_client():
    translator = responses_client()
    upstream = load_sse("chat_stream_text.sse")
    out = [check_responses_frames(translator.stream_event(e)) for e in upstream]
    types = [[e["type"] for e in batch] for batch in out]
    assert types == [
        ["response.created", "response.in_progress"],
        ["response.output_item.added", "response.content_part.added",
         "response.output_text.delta"],
        ["response.output_text.delta"],
        [],   # finish reason: remembered for the terminal event
        [],   # usage: goes into response.completed
        ["response.output_text.done", "response.content_part.done",
         "response.output_item.done", "response.completed"],
    ]
    flat = [e for batch in out for e in batch]
    assert [e["sequence_number"] for e in flat] == list(range(len(flat)))
    assert "".join(e["delta"] for e in flat if e["type"] == "response.output_text.delta") == \
        'Hello, "world"!'
    done = flat[-1]["response"]
    assert done["status"] == "completed" and done["model"] == "client-model"
    assert done["id"] == "resp_chatcmpl-AbC123"
    assert done["output"][0]["content"][0]["text"] == 'Hello, "world"!'
    assert done["usage"]["input_tokens"] == 19 and done["usage"]["output_tokens"] == 5
    assert flat[0]["response"]["status"] == "in_progress"
    assert translator.usage == Usage(input=19, output=5)
    assert translator.completed
    assert translator.finish() == []
    assert translator.relayed_text_tokens() == 4


def test_chat_upstream_tool_calls_to_responses_client():
    translator = responses_client(tools=[{"type": "function", "name": "get_weather"}])
    flat = []
    for event in load_sse("chat_stream_tools.sse"):
        flat.extend(check_responses_frames(translator.stream_event(event)))
    added = [e["item"] for e in flat if e["type"] == "response.output_item.added"]
    assert [(i["type"], i["call_id"], i["name"]) for i in added] == [
        ("function_call", "call_weather1", "get_weather"),
        ("function_call", "call_time2", "get_time")]
    deltas = [(e["output_index"], e["delta"]) for e in flat
              if e["type"] == "response.function_call_arguments.delta"]
    assert deltas == [(0, '{"city":'), (0, ' "Paris"}'), (1, '{"tz": "CET"}')]
    final = flat[-1]
    assert final["type"] == "response.completed"
    assert [(i["call_id"], i["arguments"]) for i in final["response"]["output"]] == [
        ("call_weather1", '{"city": "Paris"}'), ("call_time2", '{"tz": "CET"}')]
    assert final["response"]["tools"] == [{"type": "function", "name": "get_weather"}]
    assert translator.usage == Usage(input=120, output=40, cache_read=64)


def test_chat_upstream_length_gives_response_incomplete():
    translator = responses_client()
    events = load_sse("chat_stream_text.sse")
    chunk = orjson.loads(events[3].data)
    chunk["choices"][0]["finish_reason"] = "length"
    events[3] = SSEEvent(orjson.dumps(chunk))
    flat = [e for ev in events for e in check_responses_frames(translator.stream_event(ev))]
    assert flat[-1]["type"] == "response.incomplete"
    assert flat[-1]["response"]["incomplete_details"] == {"reason": "max_output_tokens"}


@pytest.mark.parametrize("include_usage", [None, False, True])
def test_responses_upstream_text_to_chat_client(include_usage):
    translator = chat_client(include_usage)
    upstream = load_sse("responses_stream_text.sse")
    out = []
    for event in upstream:
        frames = translator.stream_event(event)
        out.append(payloads(frames))
    # created -> role chunk; in_progress, item/part added -> nothing; deltas -> one chunk each;
    # done events -> nothing; completed -> finish chunk (+ usage chunk) + [DONE]
    assert [len(batch) for batch in out] == [1, 0, 0, 0, 1, 1, 0, 0, 0,
                                             3 if include_usage else 2]
    chunks = [c for batch in out for c in batch]
    assert chunks[-1] == "[DONE]" and chunks.count("[DONE]") == 1
    for chunk in chunks[:-1]:
        ChatCompletionChunk.model_validate(chunk)
        assert chunk["model"] == "client-model" and chunk["id"] == "chatcmpl-resp_stream_1"
        assert ("usage" in chunk) == bool(include_usage)
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks[:-1]
                   if c["choices"]) == 'Hi there "friend"'
    finish = [c for c in chunks[:-1] if c["choices"] and c["choices"][0]["finish_reason"]]
    assert [c["choices"][0]["finish_reason"] for c in finish] == ["stop"]
    if include_usage:
        assert chunks[-2]["choices"] == []
        assert chunks[-2]["usage"]["prompt_tokens"] == 37
        assert chunks[-2]["usage"]["completion_tokens"] == 11
    assert translator.usage == Usage(input=37, output=11)
    assert translator.finish() == []


def test_responses_upstream_tool_call_to_chat_client():
    translator = chat_client(True)
    chunks = []
    for event in load_sse("responses_stream_tool.sse"):
        chunks.extend(payloads(translator.stream_event(event)))
    for chunk in chunks[:-1]:
        ChatCompletionChunk.model_validate(chunk)
    calls = [c["choices"][0]["delta"]["tool_calls"][0] for c in chunks[:-1]
             if c["choices"] and "tool_calls" in c["choices"][0]["delta"]]
    assert calls == [
        {"index": 0, "id": "call_w1", "type": "function",
         "function": {"name": "get_weather", "arguments": ""}},
        {"index": 0, "function": {"arguments": '{"city":'}},
        {"index": 0, "function": {"arguments": '"Paris"}'}},
    ]
    finish = [c["choices"][0]["finish_reason"] for c in chunks[:-1]
              if c["choices"] and c["choices"][0]["finish_reason"]]
    assert finish == ["tool_calls"]
    assert translator.usage == Usage(input=60, output=18, cache_read=32, reasoning=6)


def test_upstream_failure_inside_stream_becomes_native_error():
    translator = chat_client()
    events = load_sse("responses_stream_text.sse")[:5]
    for event in events:
        translator.stream_event(event)
    failed = {"type": "response.failed", "sequence_number": 5,
              "response": {"id": "resp_stream_1", "status": "failed",
                           "error": {"code": "server_error", "message": "boom"}, "output": []}}
    frames = translator.stream_event(SSEEvent(orjson.dumps(failed), "response.failed"))
    assert payloads(frames) == [{"error": {"message": "boom", "type": "upstream_error",
                                           "code": "server_error", "param": None}}, "[DONE]"]
    assert not translator.completed and translator.usage is None
    assert translator.finish() == []


def test_error_frames_after_start_for_each_client():
    chat = chat_client()
    chat.stream_event(load_sse("responses_stream_text.sse")[0])
    assert payloads(chat.error_frames("Upstream request failed", "upstream_error", None)) == [
        {"error": {"message": "Upstream request failed", "type": "upstream_error",
                   "code": None, "param": None}}, "[DONE]"]
    assert chat.error_frames("again", "x", None) == [] and chat.finish() == []
    responses = responses_client()
    responses.stream_event(load_sse("chat_stream_text.sse")[0])
    (event,) = check_responses_frames(responses.error_frames("Upstream request failed",
                                                             "upstream_error", "bad_gateway"))
    assert event == {"type": "error", "code": "bad_gateway", "message": "Upstream request failed",
                     "param": None, "sequence_number": 2}
    assert responses.finish() == []


def test_truncated_upstream_still_closes_the_client_stream():
    translator = responses_client()
    for event in load_sse("chat_stream_text.sse")[:3]:
        translator.stream_event(event)
    assert not translator.completed and translator.usage is None
    closing = check_responses_frames(translator.finish())
    assert closing[-1]["type"] == "response.completed"
    assert closing[-1]["response"]["usage"] is None
    assert translator.relayed_text_tokens() == 4
    chat = chat_client()
    chat.stream_event(load_sse("responses_stream_text.sse")[0])
    assert chat.finish() == [b"data: [DONE]\n\n"]
    assert chat.finish() == []


def test_unreadable_upstream_chunk_raises():
    from gateway.protocols.errors import UpstreamFormatError
    with pytest.raises(UpstreamFormatError):
        responses_client().stream_event(SSEEvent(b"{broken"))


@pytest.mark.parametrize("include_usage", [False, True])
def test_responses_upstream_to_completions_client(include_usage):
    request = parse_client_request("completions", orjson.dumps(
        {"model": "legacy", "prompt": "hi", "stream": True,
         "stream_options": {"include_usage": include_usage}}))
    translator = make_translator("completions", "responses", request, "gpt-4.1")
    assert orjson.loads(translator.upstream_body())["stream"] is True
    chunks = []
    for event in load_sse("responses_stream_text.sse"):
        chunks.extend(payloads(translator.stream_event(event)))
    assert chunks[-1] == "[DONE]" and chunks.count("[DONE]") == 1
    for chunk in chunks[:-1]:
        if chunk["choices"] and chunk["choices"][0]["finish_reason"]:
            Completion.model_validate(chunk)  # (the SDK model types only final chunks)
        assert chunk["object"] == "text_completion" and chunk["model"] == "legacy"
    texts = [c["choices"][0]["text"] for c in chunks[:-1] if c["choices"]]
    assert "".join(texts) == 'Hi there "friend"'
    assert [c["choices"][0]["finish_reason"] for c in chunks[:-1] if c["choices"]][-1] == "stop"
    assert any(c["choices"] == [] for c in chunks[:-1]) == include_usage
    assert translator.usage == Usage(input=37, output=11)


def test_sdk_stream_accumulators_rebuild_the_converted_answers():
    """The official SDK's own stream helpers (what ``client.responses.stream()`` and
    ``client.chat.completions.stream()`` run) accept our converted streams end to end."""
    from openai import omit
    from openai.lib.streaming.chat._completions import ChatCompletionStreamState
    from openai.lib.streaming.responses._responses import ResponseStreamState

    responses_state = ResponseStreamState(input_tools=omit, text_format=omit)
    translator = responses_client()
    for event in load_sse("chat_stream_tools.sse"):
        for sse in frames_to_events(translator.stream_event(event)):
            responses_state.handle_event(RESPONSES_EVENT.validate_python(orjson.loads(sse.data)))
    final = responses_state._completed_response
    assert final is not None and final.status == "completed"
    assert [(item.call_id, item.arguments) for item in final.output] == [
        ("call_weather1", '{"city": "Paris"}'), ("call_time2", '{"tz": "CET"}')]

    chat_state = ChatCompletionStreamState()
    chat = chat_client(True)
    for event in load_sse("responses_stream_tool.sse"):
        for chunk in payloads(chat.stream_event(event)):
            if chunk != "[DONE]":
                chat_state.handle_chunk(ChatCompletionChunk.model_validate(chunk))
    completion = chat_state.get_final_completion()
    call = completion.choices[0].message.tool_calls[0]
    assert (call.id, call.function.name, call.function.arguments) == (
        "call_w1", "get_weather", '{"city":"Paris"}')
    assert completion.choices[0].finish_reason == "tool_calls"
    assert completion.usage.prompt_tokens == 60
