"""Reasoning ("thinking") content and settings translated between the formats (issue 5, §9).

Requests: the effort <-> budget table of ``gateway.protocols.reasoning`` in every direction.
Answers and streams: each upstream format's reasoning reaches each client format in that
client's native shape (every frame validated with the official SDK's models), signatures and
redacted thinking never cross formats, and usage -- so billing -- is what the upstream reported
(reasoning inside output), exactly as on the same-format path.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import orjson
import pytest
from anthropic.types import Message
from google.genai import types
from openai.types.chat import ChatCompletion, ChatCompletionChunk
from openai.types.responses import Response

from gateway.billing.cost import PriceSet, compute_cost
from gateway.billing.usage import Usage
from gateway.protocols.errors import ProtocolError
from gateway.protocols.reasoning import effort_for_budget
from gateway.protocols.sse import SSEParser
from gateway.protocols.translate import make_translator
from tests.gateway.protocols.recorded import frames_to_events
from tests.gateway.protocols.test_google import google_request
from tests.gateway.protocols.test_messages import client_request
from tests.gateway.protocols.test_messages_stream import _accumulate
from tests.gateway.protocols.test_stream_convert import RESPONSES_EVENT

THOUGHT = "Let me think. It is 4."
SIGNATURE = "sig-SECRET-upstream"
USER = [{"role": "user", "content": "2+2?"}]


def _request(family: str, extra: dict[str, Any], stream: bool = False):
    if family == "google":
        body = {"contents": [{"role": "user", "parts": [{"text": "2+2?"}]}], **extra}
        return google_request(body, stream=stream)
    if family == "responses":
        body = {"model": "client", "input": "2+2?", **extra}
    else:
        body = {"model": "client", "messages": USER, **extra}
    if stream and family != "google":
        body["stream"] = True
        if family == "chat":
            body["stream_options"] = {"include_usage": True}
    return client_request(family, body, stream=stream)


def _sent(family: str, channel: str, extra: dict[str, Any]) -> dict[str, Any]:
    translator = make_translator(family, channel, _request(family, extra), "up")
    return orjson.loads(translator.upstream_body())


# -- request settings ----------------------------------------------------------------------

def test_messages_thinking_maps_to_every_upstream() -> None:
    extra = {"max_tokens": 16000, "temperature": 0.3,
             "thinking": {"type": "enabled", "budget_tokens": 10000}}
    assert _sent("messages", "responses", extra)["reasoning"] == {"effort": "high",
                                                                  "summary": "auto"}
    assert _sent("messages", "compat", extra)["reasoning_effort"] == "high"
    google = _sent("messages", "modelaction", extra)["generationConfig"]
    assert google["thinkingConfig"] == {"thinkingBudget": 10000, "includeThoughts": True}


def test_effort_maps_to_budgets() -> None:
    sent = _sent("chat", "messages", {"reasoning_effort": "low", "temperature": 0.3,
                                      "top_p": 0.5})
    assert sent["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    assert sent["max_tokens"] == 4096 + 2048  # no client cap: the default plus the budget
    assert "temperature" not in sent and "top_p" not in sent  # Messages refuses them then
    assert _sent("chat", "modelaction", {"reasoning_effort": "low"})["generationConfig"] == {
        "thinkingConfig": {"thinkingBudget": 2048}}
    sent = _sent("responses", "messages", {"max_output_tokens": 20000,
                                           "reasoning": {"effort": "medium",
                                                         "summary": "auto"}})
    assert sent["thinking"] == {"type": "enabled", "budget_tokens": 8192}
    assert _sent("responses", "modelaction", {"reasoning": {"effort": "high",
                                                            "summary": "detailed"}})[
        "generationConfig"]["thinkingConfig"] == {"thinkingBudget": 24576,
                                                  "includeThoughts": True}
    # a chat client cannot ask to see reasoning: no summary is requested for it
    assert _sent("chat", "responses", {"reasoning_effort": "minimal"})["reasoning"] == {
        "effort": "minimal"}


def test_google_thinking_config_maps_out() -> None:
    off = {"generationConfig": {"thinkingConfig": {"thinkingBudget": 0}}}
    assert "reasoning_effort" not in _sent("google", "compat", off)
    assert "thinking" not in _sent("google", "messages", off)
    assert "reasoning" not in _sent("google", "responses", off)
    dynamic = {"generationConfig": {"thinkingConfig": {"thinkingBudget": -1,
                                                       "includeThoughts": True}}}
    assert _sent("google", "responses", dynamic)["reasoning"] == {"effort": "medium",
                                                                  "summary": "auto"}
    assert _sent("google", "messages", dynamic)["thinking"]["budget_tokens"] == 8192
    level = {"generationConfig": {"thinkingConfig": {"thinkingLevel": "HIGH"}}}
    assert _sent("google", "compat", level)["reasoning_effort"] == "high"


def test_messages_budget_fits_under_max_tokens() -> None:
    assert _sent("chat", "messages", {"reasoning_effort": "high", "max_tokens": 3000})[
        "thinking"] == {"type": "enabled", "budget_tokens": 2999}
    small = _sent("chat", "messages", {"reasoning_effort": "high", "max_tokens": 1000,
                                       "temperature": 0.2})
    assert "thinking" not in small and small["temperature"] == 0.2
    forced = _sent("chat", "messages", {
        "reasoning_effort": "high", "tools": [{"type": "function", "function": {
            "name": "f", "parameters": {"type": "object"}}}], "tool_choice": "required"})
    assert "thinking" not in forced
    loop = _sent("chat", "messages", {"reasoning_effort": "high", "messages": [
        *USER, {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "4"}]})
    assert "thinking" not in loop  # the tool_use turn has no signed thinking to replay


@pytest.mark.parametrize("budget, effort", [
    (0, None), (-1, "medium"), (1, "low"), (2048, "low"), (2049, "medium"), (8192, "medium"),
    (8193, "high"), (64000, "high")])
def test_budget_to_effort_table(budget: int, effort: str | None) -> None:
    assert effort_for_budget(budget) == effort


@pytest.mark.parametrize("family, extra, param", [
    ("messages", {"max_tokens": 10, "thinking": {"type": "enabled", "budget_tokens": "x"}},
     "thinking.budget_tokens"),
    ("messages", {"max_tokens": 10, "thinking": {"type": "sometimes"}}, "thinking"),
    ("messages", {"max_tokens": 10, "thinking": "on"}, "thinking"),
    ("google", {"generationConfig": {"thinkingConfig": {"thinkingBudget": -5}}},
     "generationConfig.thinkingConfig.thinkingBudget"),
    ("google", {"generationConfig": {"thinkingConfig": {"includeThoughts": "yes"}}},
     "generationConfig.thinkingConfig.includeThoughts"),
])
def test_bad_reasoning_settings_are_400(family: str, extra: dict[str, Any], param: str) -> None:
    with pytest.raises(ProtocolError) as caught:
        make_translator(family, "compat", _request(family, extra), "up")
    assert caught.value.status == 400 and caught.value.param == param


def test_history_reasoning_is_not_replayed_to_another_provider() -> None:
    sent = _sent("messages", "modelaction", {"max_tokens": 100, "messages": [
        *USER, {"role": "assistant", "content": [
            {"type": "thinking", "thinking": "secret chain", "signature": SIGNATURE},
            {"type": "redacted_thinking", "data": "opaque"},
            {"type": "text", "text": "4"}]},
        {"role": "user", "content": "and 3+3?"}]})
    text = orjson.dumps(sent).decode()
    assert "secret chain" not in text and SIGNATURE not in text and "opaque" not in text
    assert sent["contents"][1] == {"role": "model", "parts": [{"text": "4"}]}


# -- non-stream answers --------------------------------------------------------------------

USAGE = Usage(input=10, output=30, reasoning=20)

ANSWERS: dict[str, dict[str, Any]] = {
    "compat": {
        "id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "up",
        "choices": [{"index": 0, "finish_reason": "stop", "message": {
            "role": "assistant", "content": "4", "reasoning_content": THOUGHT}}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 30, "total_tokens": 40,
                  "completion_tokens_details": {"reasoning_tokens": 20}}},
    "responses": {
        "id": "resp_1", "object": "response", "created_at": 1, "status": "completed",
        "model": "up", "output": [
            {"type": "reasoning", "id": "rs_1", "encrypted_content": SIGNATURE,
             "summary": [{"type": "summary_text", "text": "Let me think."},
                         {"type": "summary_text", "text": "It is 4."}]},
            {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
             "content": [{"type": "output_text", "text": "4", "annotations": []}]}],
        "usage": {"input_tokens": 10, "output_tokens": 30, "total_tokens": 40,
                  "output_tokens_details": {"reasoning_tokens": 20}}},
    "messages": {
        "id": "msg_1", "type": "message", "role": "assistant", "model": "up",
        "stop_reason": "end_turn", "stop_sequence": None,
        "content": [{"type": "thinking", "thinking": THOUGHT, "signature": SIGNATURE},
                    {"type": "redacted_thinking", "data": "opaque-redacted"},
                    {"type": "text", "text": "4"}],
        "usage": {"input_tokens": 10, "output_tokens": 30}},
    "modelaction": {
        "responseId": "r1", "modelVersion": "up", "candidates": [{"index": 0,
            "finishReason": "STOP", "content": {"role": "model", "parts": [
                {"text": THOUGHT, "thought": True, "thoughtSignature": SIGNATURE},
                {"text": "4"}]}}],
        "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 10,
                          "thoughtsTokenCount": 20, "totalTokenCount": 40}},
}
#: the Messages API reports no reasoning breakdown: its usage says only input and output
EXPECTED_USAGE = {"compat": USAGE, "responses": USAGE, "modelaction": USAGE,
                  "messages": Usage(input=10, output=30)}
#: the Responses summary parts, joined by a blank line
EXPECTED_THOUGHT = {"responses": "Let me think.\n\nIt is 4."}


def _reasoning_of(family: str, body: dict[str, Any]) -> tuple[str | None, str]:
    """(reasoning, answer text) of a client answer, validated with that client's SDK."""
    if family == "chat":
        message = ChatCompletion.model_validate(body).choices[0].message
        return getattr(message, "reasoning_content", None), message.content or ""
    if family == "responses":
        response = Response.model_validate(body)
        thoughts = [s.text for item in response.output if item.type == "reasoning"
                    for s in item.summary]
        assert response.output[0].type == "reasoning"
        return "".join(thoughts) or None, response.output_text
    if family == "messages":
        content = Message.model_validate(body).content
        assert content[0].type == "thinking" and content[0].signature == ""
        return content[0].thinking, "".join(b.text for b in content if b.type == "text")
    parts = types.GenerateContentResponse.model_validate(body).candidates[0].content.parts
    assert parts[0].thought is True and parts[0].thought_signature is None
    return parts[0].text, "".join(p.text or "" for p in parts if not p.thought)


CLIENTS = ("chat", "responses", "messages", "google")
NATIVE = {"chat": "compat", "responses": "responses", "messages": "messages",
          "google": "modelaction"}
PAIRS = [(c, u) for c in CLIENTS for u in ANSWERS if NATIVE[c] != u]


@pytest.mark.parametrize("client, upstream", PAIRS)
def test_answer_reasoning_reaches_every_client(client: str, upstream: str) -> None:
    extra = {"max_tokens": 100} if client == "messages" else {}
    translator = make_translator(client, upstream, _request(client, extra), "up")
    body = orjson.loads(translator.response(200, orjson.dumps(ANSWERS[upstream])))
    thought, text = _reasoning_of(client, body)
    assert thought == EXPECTED_THOUGHT.get(upstream, THOUGHT)
    assert text == "4"
    raw = orjson.dumps(body).decode()
    assert SIGNATURE not in raw and "opaque-redacted" not in raw
    assert translator.usage == EXPECTED_USAGE[upstream]


# -- streams -------------------------------------------------------------------------------

def _sse(payloads: list[dict[str, Any]], named: bool = False) -> bytes:
    return b"".join((b"event: " + p["type"].encode() + b"\n" if named else b"")
                    + b"data: " + orjson.dumps(p) + b"\n\n" for p in payloads)


def _chat_chunk(delta: dict[str, Any] | None, finish: str | None = None,
                usage: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "up",
            "choices": [] if delta is None else [{"index": 0, "delta": delta,
                                                  "finish_reason": finish}],
            "usage": usage}


def _google_chunk(parts: list[dict[str, Any]], finish: str | None = None) -> dict[str, Any]:
    candidate: dict[str, Any] = {"index": 0, "content": {"role": "model", "parts": parts}}
    body: dict[str, Any] = {"responseId": "r1", "modelVersion": "up", "candidates": [candidate]}
    if finish:
        candidate["finishReason"] = finish
        body["usageMetadata"] = ANSWERS["modelaction"]["usageMetadata"]
    return body


_RS = {"item_id": "rs_1", "output_index": 0}
STREAMS: dict[str, bytes] = {
    "compat": _sse([
        _chat_chunk({"role": "assistant", "content": ""}),
        _chat_chunk({"reasoning_content": "Let me think. "}),
        _chat_chunk({"reasoning_content": "It is 4."}),
        _chat_chunk({"content": "4"}),
        _chat_chunk({}, "stop"),
        _chat_chunk(None, usage=ANSWERS["compat"]["usage"])]) + b"data: [DONE]\n\n",
    "responses": _sse([
        {"type": "response.created", "response": {"id": "resp_1", "created_at": 1}},
        {"type": "response.output_item.added", "output_index": 0,
         "item": {"type": "reasoning", "id": "rs_1", "summary": []}},
        {"type": "response.reasoning_summary_text.delta", **_RS, "summary_index": 0,
         "delta": "Let me think."},
        {"type": "response.reasoning_summary_text.delta", **_RS, "summary_index": 1,
         "delta": "It is 4."},
        {"type": "response.output_item.done", "output_index": 0,
         "item": {"type": "reasoning", "id": "rs_1", "encrypted_content": SIGNATURE,
                  "summary": []}},
        {"type": "response.output_text.delta", "item_id": "msg_1", "output_index": 1,
         "content_index": 0, "delta": "4"},
        {"type": "response.completed", "response": {
            "id": "resp_1", "status": "completed", "output": [],
            "usage": ANSWERS["responses"]["usage"]}}], named=True),
    "messages": _sse([
        {"type": "message_start", "message": {
            "id": "msg_1", "type": "message", "role": "assistant", "model": "up",
            "content": [], "usage": {"input_tokens": 10, "output_tokens": 1}}},
        {"type": "content_block_start", "index": 0,
         "content_block": {"type": "thinking", "thinking": "", "signature": ""}},
        {"type": "content_block_delta", "index": 0,
         "delta": {"type": "thinking_delta", "thinking": "Let me think. "}},
        {"type": "content_block_delta", "index": 0,
         "delta": {"type": "thinking_delta", "thinking": "It is 4."}},
        {"type": "content_block_delta", "index": 0,
         "delta": {"type": "signature_delta", "signature": SIGNATURE}},
        {"type": "content_block_stop", "index": 0},
        {"type": "content_block_start", "index": 1,
         "content_block": {"type": "redacted_thinking", "data": "opaque-redacted"}},
        {"type": "content_block_stop", "index": 1},
        {"type": "content_block_start", "index": 2,
         "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 2,
         "delta": {"type": "text_delta", "text": "4"}},
        {"type": "content_block_stop", "index": 2},
        {"type": "message_delta", "delta": {"stop_reason": "end_turn"},
         "usage": {"output_tokens": 30}},
        {"type": "message_stop"}], named=True),
    "modelaction": _sse([
        _google_chunk([{"text": "Let me think. ", "thought": True}]),
        _google_chunk([{"text": "It is 4.", "thought": True, "thoughtSignature": SIGNATURE}]),
        _google_chunk([{"text": "4"}], "STOP")]),
}


#: upstream events that carry reasoning text (each must produce client frames at once)
REASONING_MARKERS = (b"thinking_delta", b'"thought":true', b'"reasoning_content":"',
                     b"reasoning_summary_text.delta")


def _stream(client: str, upstream: str) -> tuple[Any, list[bytes]]:
    extra = {"max_tokens": 100} if client == "messages" else {}
    translator = make_translator(client, upstream, _request(client, extra, stream=True), "up")
    frames: list[bytes] = []
    for event in SSEParser().feed(STREAMS[upstream]):
        out = translator.stream_event(event)
        if any(marker in event.data for marker in REASONING_MARKERS):
            assert out, "reasoning must be relayed at once, not buffered"
        frames.extend(out)
    frames.extend(translator.finish())
    return translator, frames


def _client_stream(client: str, frames: list[bytes]) -> tuple[str, str]:
    """(reasoning, answer text) the client's SDK would read from these frames."""
    events = frames_to_events(frames)
    if client == "chat":
        assert events[-1].data == b"[DONE]"
        chunks = [ChatCompletionChunk.model_validate(orjson.loads(e.data)) for e in events[:-1]]
        deltas = [c.choices[0].delta for c in chunks if c.choices]
        return ("".join(getattr(d, "reasoning_content", None) or "" for d in deltas),
                "".join(d.content or "" for d in deltas))
    payloads = [orjson.loads(e.data) for e in events]
    if client == "responses":
        for payload in payloads:
            RESPONSES_EVENT.validate_python(payload)
        final = Response.model_validate(payloads[-1]["response"])
        summary = [s.text for item in final.output if item.type == "reasoning"
                   for s in item.summary]
        deltas = "".join(p["delta"] for p in payloads
                         if p["type"] == "response.reasoning_summary_text.delta")
        assert summary == [deltas]
        return deltas, final.output_text
    if client == "messages":
        message = _accumulate(payloads)
        thinking = [b for b in message.content if b.type == "thinking"]
        assert len(thinking) == 1 and thinking[0].signature == ""
        return thinking[0].thinking, "".join(b.text for b in message.content
                                             if b.type == "text")
    chunks = [types.GenerateContentResponse.model_validate(p) for p in payloads]
    parts = [p for c in chunks for p in c.candidates[0].content.parts or ()]
    return ("".join(p.text or "" for p in parts if p.thought),
            "".join(p.text or "" for p in parts if not p.thought))


@pytest.mark.parametrize("client, upstream", PAIRS)
def test_stream_reasoning_reaches_every_client(client: str, upstream: str) -> None:
    translator, frames = _stream(client, upstream)
    thought, text = _client_stream(client, frames)
    assert thought == EXPECTED_THOUGHT.get(upstream, THOUGHT)
    assert text == "4"
    raw = b"".join(frames)
    assert SIGNATURE.encode() not in raw and b"opaque-redacted" not in raw
    assert translator.completed
    assert translator.usage == EXPECTED_USAGE[upstream]


def test_text_completions_client_gets_no_reasoning() -> None:
    body = {"model": "client", "prompt": "2+2?", "stream": True}
    translator = make_translator("completions", "messages",
                                 client_request("completions", body, stream=True), "up")
    frames: list[bytes] = []
    for event in SSEParser().feed(STREAMS["messages"]):
        frames.extend(translator.stream_event(event))
    chunks = [orjson.loads(e.data) for e in frames_to_events(frames) if e.data != b"[DONE]"]
    assert "".join(c["choices"][0]["text"] for c in chunks if c["choices"]) == "4"
    assert b"think" not in b"".join(frames)


@pytest.mark.parametrize("client, upstream", [
    (c, u) for c in ("chat", "responses", "google") for u in ("compat", "responses", "modelaction")
    if NATIVE[c] != u])
def test_billing_of_reasoning_is_unchanged(client: str, upstream: str) -> None:
    """A converted stream is billed as the native one: reasoning tokens are output tokens."""
    native = {"compat": "chat", "responses": "responses", "modelaction": "google"}[upstream]
    reference, _ = _stream(native, upstream)
    translator, _ = _stream(client, upstream)
    assert translator.usage == reference.usage == USAGE
    prices = PriceSet(input=Decimal("1"), output=Decimal("2"))
    assert compute_cost(translator.usage, prices).cost == Decimal("0.00007")  # 10*1 + 30*2
    assert translator.relayed_text_tokens() > 0
