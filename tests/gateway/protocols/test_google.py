"""The Google generateContent format: path parsing, request conversion both ways, answers.

Recorded-style bodies follow the public Gemini API reference; answers written for a Google
client are validated with the official ``google-genai`` SDK's response model.
"""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from google.genai import types

from gateway.billing.usage import Usage
from gateway.protocols import google
from gateway.protocols.errors import ProtocolError
from gateway.protocols.translate import make_translator
from gateway.protocols.usage import extract_usage
from tests.gateway.protocols.test_messages import client_request

RECORDED_REQUEST = {
    "systemInstruction": {"parts": [{"text": "Be terse."}]},
    "contents": [
        {"role": "user", "parts": [
            {"text": "Weather in Paris?"},
            {"inlineData": {"mimeType": "image/png", "data": "iVBORw0KGgo="}}]},
        {"role": "model", "parts": [
            {"text": "thinking...", "thought": True},
            {"functionCall": {"name": "get_weather", "args": {"city": "Paris"}}}]},
        {"role": "user", "parts": [
            {"functionResponse": {"name": "get_weather", "response": {"temp": 18}}}]},
    ],
    "tools": [{"functionDeclarations": [{
        "name": "get_weather", "description": "Weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}]}],
    "toolConfig": {"functionCallingConfig": {"mode": "ANY",
                                             "allowedFunctionNames": ["get_weather"]}},
    "generationConfig": {"maxOutputTokens": 200, "temperature": 0.3, "topP": 0.9,
                         "stopSequences": ["END"]},
}

RECORDED_ANSWER = {
    "candidates": [{"content": {"role": "model", "parts": [
        {"text": "Sure. "}, {"functionCall": {"name": "get_weather",
                                              "args": {"city": "Lyon"}}}]},
        "finishReason": "STOP", "index": 0}],
    "usageMetadata": {"promptTokenCount": 120, "candidatesTokenCount": 8,
                      "thoughtsTokenCount": 30, "cachedContentTokenCount": 100,
                      "toolUsePromptTokenCount": 4, "totalTokenCount": 162},
    "modelVersion": "gemini-up", "responseId": "abc123",
}


def google_request(body: dict[str, Any], model: str = "gemini-client", stream: bool = False):
    request = client_request("google", body, stream=stream)
    return type(request)("google", model, stream, True, None, 1, body, orjson.dumps(body))


@pytest.mark.parametrize("segment, expected", [
    ("gemini-2.5-flash:generateContent", ("gemini-2.5-flash", "generateContent")),
    ("models/gemini-pro:streamGenerateContent", ("gemini-pro", "streamGenerateContent")),
    ("gemini%2Dx:countTokens", ("gemini-x", "countTokens")),
    (":generateContent", None), ("gemini", None), ("gemini:", None), ("a/b:generateContent",
                                                                       None),
])
def test_parse_model_action(segment: str, expected: tuple[str, str] | None) -> None:
    assert google.parse_model_action(segment) == expected


def test_read_request() -> None:
    assert google.read_request(RECORDED_REQUEST)[0] == 200
    with pytest.raises(ProtocolError):
        google.read_request({"contents": []})
    with pytest.raises(ProtocolError):
        google.read_request({"contents": [{"parts": [{"text": "x"}]}],
                             "generationConfig": {"maxOutputTokens": "many"}})


def test_to_chat() -> None:
    translator = make_translator("google", "compat", google_request(RECORDED_REQUEST), "gpt")
    body = orjson.loads(translator.upstream_body())
    assert translator.upstream_path() == b"/v1/chat/completions"
    assert body["messages"][0] == {"role": "system", "content": "Be terse."}
    assert body["messages"][1]["content"][1]["image_url"]["url"] == \
        "data:image/png;base64,iVBORw0KGgo="
    call = body["messages"][2]["tool_calls"][0]
    assert call["function"] == {"name": "get_weather", "arguments": '{"city":"Paris"}'}
    assert body["messages"][3] == {"role": "tool", "tool_call_id": call["id"],
                                   "content": '{"temp":18}'}
    assert body["tool_choice"] == {"type": "function", "function": {"name": "get_weather"}}
    assert (body["max_tokens"], body["temperature"], body["top_p"], body["stop"]) == (
        200, 0.3, 0.9, ["END"])


def test_from_chat_to_google_path_and_body() -> None:
    chat = {"model": "gpt", "stream": True, "messages": [
        {"role": "developer", "content": "dev"},
        {"role": "user", "content": [{"type": "text", "text": "look"},
                                     {"type": "image_url",
                                      "image_url": {"url": "https://x.test/a.webp"}}]},
        {"role": "assistant", "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}},
            {"id": "c2", "type": "function", "function": {"name": "g", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "plain"},
        {"role": "tool", "tool_call_id": "c2", "content": '{"k": 2}'}],
        "tool_choice": "required", "tools": [{"type": "function", "function": {"name": "f"}}],
        "response_format": {"type": "json_schema", "json_schema": {
            "name": "r", "schema": {"type": "object"}}}}
    translator = make_translator("chat", "modelaction", client_request("chat", chat, True),
                                 "gemini-up")
    assert translator.upstream_path() == b"/v1beta/models/gemini-up:streamGenerateContent?alt=sse"
    body = orjson.loads(translator.upstream_body())
    assert "model" not in body
    assert body["systemInstruction"] == {"parts": [{"text": "dev"}]}
    assert body["contents"][0]["parts"][1] == {"fileData": {"mimeType": "image/webp",
                                                            "fileUri": "https://x.test/a.webp"}}
    assert body["contents"][2] == {"role": "user", "parts": [
        {"functionResponse": {"name": "f", "response": {"result": "plain"}}},
        {"functionResponse": {"name": "g", "response": {"k": 2}}}]}
    assert body["toolConfig"] == {"functionCallingConfig": {"mode": "ANY"}}
    assert body["generationConfig"] == {"responseMimeType": "application/json",
                                        "responseJsonSchema": {"type": "object"}}


@pytest.mark.parametrize("body, message", [
    ({"contents": [{"parts": [{"text": "x"}]}], "tools": [{"googleSearch": {}}]},
     "only function declarations"),
    ({"contents": [{"parts": [{"inlineData": {"mimeType": "audio/wav", "data": "AA=="}}]}]},
     "audio/wav"),
    ({"contents": [{"parts": [{"text": "x"}]}], "generationConfig": {"candidateCount": 2}},
     "candidateCount"),
])
def test_unconvertible_requests_say_why(body: dict[str, Any], message: str) -> None:
    with pytest.raises(ProtocolError) as caught:
        make_translator("google", "messages", google_request(body), "claude")
    assert caught.value.status == 400 and message in caught.value.message


def test_google_answer_to_messages_client() -> None:
    translator = make_translator("messages", "modelaction", client_request("messages", {
        "model": "claude-client", "max_tokens": 10,
        "messages": [{"role": "user", "content": "hi"}]}), "gemini-up")
    answer = orjson.loads(translator.response(200, orjson.dumps(RECORDED_ANSWER)))
    assert answer["stop_reason"] == "tool_use" and answer["model"] == "claude-client"
    assert answer["content"][1]["input"] == {"city": "Lyon"}
    # thoughts are billed as output, tool-use prompt tokens as input (§10.2)
    assert translator.usage == Usage(input=124, output=38, cache_read=100, reasoning=30)


def test_chat_answer_to_google_client_is_valid() -> None:
    translator = make_translator("google", "compat", google_request(
        {"contents": [{"parts": [{"text": "hi"}]}]}), "gpt")
    chat_answer = {"id": "chatcmpl-1", "object": "chat.completion", "created": 1,
                   "model": "gpt", "choices": [{"index": 0, "finish_reason": "content_filter",
                                                "message": {"role": "assistant",
                                                            "content": "no"}}],
                   "usage": {"prompt_tokens": 20, "completion_tokens": 7, "total_tokens": 27,
                             "prompt_tokens_details": {"cached_tokens": 5},
                             "completion_tokens_details": {"reasoning_tokens": 3}}}
    answer = orjson.loads(translator.response(200, orjson.dumps(chat_answer)))
    parsed = types.GenerateContentResponse.model_validate(answer)
    assert parsed.text == "no" and parsed.model_version == "gemini-client"
    assert parsed.candidates[0].finish_reason == types.FinishReason.SAFETY  # type: ignore[index]
    assert parsed.usage_metadata.prompt_token_count == 20  # type: ignore[union-attr]
    assert parsed.usage_metadata.thoughts_token_count == 3  # type: ignore[union-attr]
    assert extract_usage("modelaction", answer) == translator.usage


def test_passthrough_keeps_body_and_names_the_client_model() -> None:
    translator = make_translator("google", "modelaction", google_request(RECORDED_REQUEST),
                                 "gemini-up")
    assert translator.upstream_path() == b"/v1beta/models/gemini-up:generateContent"
    assert orjson.loads(translator.upstream_body()) == RECORDED_REQUEST
    answer = orjson.loads(translator.response(200, orjson.dumps(RECORDED_ANSWER)))
    assert answer["modelVersion"] == "gemini-client"
    assert translator.usage == Usage(input=124, output=38, cache_read=100, reasoning=30)
