"""The Messages format: request reading, conversion to and from the other formats, answers.

Recorded-style bodies follow the public Messages API reference; converted answers are
validated against the official ``anthropic`` SDK's models.
"""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from anthropic.types import Message

from gateway.billing.usage import Usage
from gateway.protocols import messages
from gateway.protocols.errors import ProtocolError
from gateway.protocols.request import ClientRequest
from gateway.protocols.translate import make_translator
from gateway.protocols.usage import extract_usage

RECORDED_REQUEST = {
    "model": "claude-client",
    "max_tokens": 256,
    "system": [{"type": "text", "text": "You are terse."}],
    "temperature": 0.2,
    "stop_sequences": ["END"],
    "metadata": {"user_id": "u-1"},
    "tools": [{"name": "get_weather", "description": "Weather in a city",
               "input_schema": {"type": "object",
                                "properties": {"city": {"type": "string"}}}}],
    "tool_choice": {"type": "auto", "disable_parallel_tool_use": True},
    "messages": [
        {"role": "user", "content": [
            {"type": "text", "text": "Weather in Paris? Here is a photo."},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                         "data": "iVBORw0KGgo="}}]},
        {"role": "assistant", "content": [
            {"type": "thinking", "thinking": "let me check", "signature": "sig"},
            {"type": "text", "text": "Checking."},
            {"type": "tool_use", "id": "toolu_01", "name": "get_weather",
             "input": {"city": "Paris"}}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_01", "content": "18C, sunny"},
            {"type": "text", "text": "And tomorrow?"}]},
    ],
}

RECORDED_ANSWER = {
    "id": "msg_01XFDUDYJgAACzvnptvVoYEL", "type": "message", "role": "assistant",
    "model": "claude-up", "stop_reason": "tool_use", "stop_sequence": None,
    "content": [{"type": "text", "text": "Let me look."},
                {"type": "tool_use", "id": "toolu_02", "name": "get_weather",
                 "input": {"city": "Paris", "day": "tomorrow"}}],
    "usage": {"input_tokens": 40, "cache_creation_input_tokens": 5,
              "cache_read_input_tokens": 100, "output_tokens": 12},
}


def client_request(family: str, body: dict[str, Any], stream: bool = False) -> ClientRequest:
    return ClientRequest(family, str(body.get("model", "m")), stream, True, None, 1, body,
                         orjson.dumps(body))


def upstream_body(family: str, channel: str, body: dict[str, Any]) -> dict[str, Any]:
    translator = make_translator(family, channel, client_request(family, body), "up-model")
    return orjson.loads(translator.upstream_body())


def test_read_request_validates_and_estimates() -> None:
    stream, max_tokens, estimate = messages.read_request(RECORDED_REQUEST)
    assert (stream, max_tokens) == (False, 256) and estimate > 10
    with pytest.raises(ProtocolError) as caught:
        messages.read_request({"model": "m", "messages": []})
    assert caught.value.status == 400 and caught.value.param == "messages"
    with pytest.raises(ProtocolError):
        messages.read_request({"model": "m", "max_tokens": "ten",
                               "messages": [{"role": "user", "content": "x"}]})


def test_to_chat_maps_system_images_tools_and_results() -> None:
    body = upstream_body("messages", "compat", RECORDED_REQUEST)
    assert body["model"] == "up-model" and body["max_tokens"] == 256
    assert body["messages"][0] == {"role": "system", "content": "You are terse."}
    user = body["messages"][1]["content"]
    assert user[1] == {"type": "image_url",
                       "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}
    assistant = body["messages"][2]
    assert assistant["content"] == "Checking."  # the thinking block is dropped
    assert assistant["tool_calls"] == [{"id": "toolu_01", "type": "function", "function": {
        "name": "get_weather", "arguments": '{"city":"Paris"}'}}]
    assert body["messages"][3] == {"role": "tool", "tool_call_id": "toolu_01",
                                   "content": "18C, sunny"}
    assert body["messages"][4] == {"role": "user", "content": "And tomorrow?"}
    assert body["tools"][0]["function"]["parameters"]["properties"] == {
        "city": {"type": "string"}}
    assert body["tool_choice"] == "auto" and body["parallel_tool_calls"] is False
    assert body["stop"] == ["END"] and body["user"] == "u-1" and body["temperature"] == 0.2


def test_from_chat_hoists_system_merges_tool_results_and_sets_max_tokens() -> None:
    chat = {"model": "gpt", "messages": [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}},
            {"id": "c2", "type": "function", "function": {"name": "g",
                                                          "arguments": '{"a": 1}'}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "one"},
        {"role": "tool", "tool_call_id": "c2", "content": "two"}],
        "tool_choice": {"type": "function", "function": {"name": "f"}},
        "tools": [{"type": "function", "function": {"name": "f"}}]}
    body = upstream_body("chat", "messages", chat)
    assert body["system"] == "sys" and body["max_tokens"] == messages.DEFAULT_MAX_TOKENS
    assert [m["role"] for m in body["messages"]] == ["user", "assistant", "user"]
    assert body["messages"][1]["content"][1] == {"type": "tool_use", "id": "c2", "name": "g",
                                                 "input": {"a": 1}}
    assert body["messages"][2]["content"] == [
        {"type": "tool_result", "tool_use_id": "c1", "content": [{"type": "text",
                                                                  "text": "one"}]},
        {"type": "tool_result", "tool_use_id": "c2", "content": [{"type": "text",
                                                                  "text": "two"}]}]
    assert body["tool_choice"] == {"type": "tool", "name": "f"}
    assert body["tools"] == [{"name": "f", "input_schema": {"type": "object",
                                                            "properties": {}}}]


@pytest.mark.parametrize("body, message", [
    ({"messages": [{"role": "user", "content": [{"type": "document", "source": {}}]}]},
     "'document' cannot be converted"),
    ({"messages": [{"role": "user", "content": "x"}],
      "tools": [{"type": "web_search_20250305", "name": "web_search"}]},
     "only client tools"),
])
def test_unconvertible_requests_say_why(body: dict[str, Any], message: str) -> None:
    with pytest.raises(ProtocolError) as caught:
        upstream_body("messages", "compat", {"model": "m", "max_tokens": 5, **body})
    assert caught.value.status == 400 and message in caught.value.message


def test_chat_tool_arguments_must_be_json_for_messages() -> None:
    chat = {"model": "gpt", "messages": [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{oops"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "x"}]}
    with pytest.raises(ProtocolError) as caught:
        upstream_body("chat", "messages", chat)
    assert "JSON" in caught.value.message


def test_messages_answer_to_chat_and_back() -> None:
    translator = make_translator("chat", "messages", client_request("chat", {
        "model": "client", "messages": [{"role": "user", "content": "hi"}]}), "claude-up")
    answer = orjson.loads(translator.response(200, orjson.dumps(RECORDED_ANSWER)))
    choice = answer["choices"][0]
    assert answer["model"] == "client" and choice["finish_reason"] == "tool_calls"
    assert choice["message"]["content"] == "Let me look."
    assert choice["message"]["tool_calls"][0]["function"] == {
        "name": "get_weather", "arguments": '{"city":"Paris","day":"tomorrow"}'}
    # usage: Messages input excludes the cache; ours includes it
    assert translator.usage == Usage(input=145, output=12, cache_read=100, cache_write_5m=5)
    assert answer["usage"]["prompt_tokens"] == 145
    assert answer["usage"]["prompt_tokens_details"]["cached_tokens"] == 100


def test_chat_answer_to_messages_client_is_a_valid_message() -> None:
    translator = make_translator("messages", "compat", client_request(
        "messages", {"model": "claude-client", "max_tokens": 10,
                     "messages": [{"role": "user", "content": "hi"}]}), "gpt-up")
    chat_answer = {"id": "chatcmpl-1", "object": "chat.completion", "created": 1,
                   "model": "gpt-up", "choices": [{"index": 0, "finish_reason": "length",
                                                   "message": {"role": "assistant",
                                                               "content": "partial"}}],
                   "usage": {"prompt_tokens": 30, "completion_tokens": 10,
                             "total_tokens": 40,
                             "prompt_tokens_details": {"cached_tokens": 20}}}
    answer = orjson.loads(translator.response(200, orjson.dumps(chat_answer)))
    message = Message.model_validate(answer)
    assert message.model == "claude-client" and message.stop_reason == "max_tokens"
    assert message.content[0].text == "partial"  # type: ignore[union-attr]
    assert message.usage.input_tokens == 10 and message.usage.cache_read_input_tokens == 20
    # what the client sees reads back to the same counts
    assert extract_usage("messages", answer) == translator.usage


def test_passthrough_swaps_model_only() -> None:
    body = dict(RECORDED_REQUEST)
    translator = make_translator("messages", "messages", client_request("messages", body),
                                 "claude-up")
    sent = orjson.loads(translator.upstream_body())
    assert sent == {**RECORDED_REQUEST, "model": "claude-up"}
    answer = orjson.loads(translator.response(200, orjson.dumps(RECORDED_ANSWER)))
    assert answer["model"] == "claude-client"
    assert translator.usage == Usage(input=145, output=12, cache_read=100, cache_write_5m=5)
