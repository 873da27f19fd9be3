"""parse_client_request: the 400s of pipeline steps 5-6 and the fields the pipeline reads."""

from __future__ import annotations

import orjson
import pytest

from gateway.protocols.errors import ProtocolError
from gateway.protocols.estimate import estimate_texts, estimate_tokens
from gateway.protocols.request import parse_client_request


def body(**fields) -> bytes:
    return orjson.dumps(fields)


CHAT_MESSAGES = [{"role": "user", "content": "hello"}]


@pytest.mark.parametrize("family, raw, message, param", [
    ("chat", b"[1, 2]", "Invalid request body", None),
    ("chat", b"{not json", "Invalid request body", None),
    ("chat", b"", "Invalid request body", None),
    ("chat", body(messages=CHAT_MESSAGES), "Model not specified", "model"),
    ("chat", body(model=12, messages=CHAT_MESSAGES), "Model not specified", "model"),
    ("chat", body(model="   ", messages=CHAT_MESSAGES), "Model not specified", "model"),
    ("chat", body(model="m"), "messages are required", "messages"),
    ("chat", body(model="m", messages="hi"), "messages are required", "messages"),
    ("chat", body(model="m", messages=[]), "messages are required", "messages"),
    ("chat", body(model="m", messages=["hi"]), "each message must be an object with a role",
     "messages[0]"),
    ("chat", body(model="m", messages=CHAT_MESSAGES, stream="yes"), "stream must be a boolean",
     "stream"),
    ("chat", body(model="m", messages=CHAT_MESSAGES, stream_options=[]),
     "stream_options must be an object", "stream_options"),
    ("chat", body(model="m", messages=CHAT_MESSAGES, stream_options={"include_usage": 1}),
     "include_usage must be a boolean", "include_usage"),
    ("chat", body(model="m", messages=CHAT_MESSAGES, max_tokens=-1),
     "max_tokens must be at least 0", "max_tokens"),
    ("chat", body(model="m", messages=CHAT_MESSAGES, max_completion_tokens=-5),
     "max_completion_tokens must be at least 0", "max_completion_tokens"),
    ("chat", body(model="m", messages=CHAT_MESSAGES, max_tokens="10"),
     "max_tokens must be an integer", "max_tokens"),
    ("chat", body(model="m", messages=CHAT_MESSAGES, max_tokens=True),
     "max_tokens must be an integer", "max_tokens"),
    ("chat", body(model="m", messages=CHAT_MESSAGES, n=0), "n must be at least 1", "n"),
    ("chat", body(model="m", messages=CHAT_MESSAGES, temperature="hot"),
     "temperature must be a number", "temperature"),
    ("responses", body(input="hi"), "Model not specified", "model"),
    ("responses", body(model="m", input=5), "input must be a string or an array of items",
     "input"),
    ("responses", body(model="m", input=["x"]), "input items must be objects", "input"),
    ("responses", body(model="m", input="hi", max_output_tokens=-1),
     "max_output_tokens must be at least 0", "max_output_tokens"),
    ("responses", body(model="m", input="hi", stream=1), "stream must be a boolean", "stream"),
    ("responses", body(model="m", input="hi", instructions=3),
     "instructions must be a string", "instructions"),
    ("completions", body(prompt="x"), "Model not specified", "model"),
    ("completions", body(model="m", prompt={"a": 1}),
     "prompt must be a string, an array of strings or token arrays", "prompt"),
    ("completions", body(model="m", prompt="x", max_tokens=-3),
     "max_tokens must be at least 0", "max_tokens"),
])
def test_bad_requests_are_refused_with_a_400(family, raw, message, param):
    with pytest.raises(ProtocolError) as caught:
        parse_client_request(family, raw)
    assert caught.value.status == 400
    assert caught.value.message == message
    assert caught.value.param == param
    assert caught.value.type == "invalid_request_error"


def test_unknown_family_is_refused():
    with pytest.raises(ProtocolError):
        parse_client_request("images", body(model="m"))


def test_chat_fields_read():
    request = parse_client_request("chat", body(
        model=" gpt-x ", messages=[{"role": "system", "content": "be brief"},
                                   {"role": "user", "content": [{"type": "text", "text": "hi"}]}],
        stream=True, stream_options={"include_usage": True}, max_tokens=50,
        max_completion_tokens=70, unknown_field={"kept": 1}))
    assert request.model == "gpt-x"
    assert request.stream is True
    assert request.wants_usage_in_stream is True
    assert request.max_output_tokens == 70  # max_completion_tokens wins
    assert request.estimated_input_tokens == estimate_tokens("be brief") + estimate_tokens("hi")
    assert request.body["unknown_field"] == {"kept": 1}


def test_chat_defaults_and_nulls():
    request = parse_client_request("chat", body(model="m", messages=CHAT_MESSAGES, stream=None,
                                                stream_options=None, max_tokens=None))
    assert (request.stream, request.wants_usage_in_stream, request.max_output_tokens) == (
        False, False, None)
    assert parse_client_request("chat", body(model="m", messages=CHAT_MESSAGES,
                                             max_tokens=0)).max_output_tokens == 0


def test_chat_estimate_counts_tool_calls_and_tools():
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]
    plain = parse_client_request("chat", body(model="m", messages=[
        {"role": "assistant", "content": None,
         "tool_calls": [{"id": "c", "type": "function",
                         "function": {"name": "lookup", "arguments": '{"q": "weather"}'}}]}]))
    assert plain.estimated_input_tokens == estimate_texts(["lookup", '{"q": "weather"}'])
    with_tools = parse_client_request("chat", body(model="m", messages=CHAT_MESSAGES, tools=tools))
    assert with_tools.estimated_input_tokens > estimate_tokens("hello")


def test_responses_fields_read():
    request = parse_client_request("responses", body(
        model="m", instructions="Be nice", stream=True, max_output_tokens=99,
        input=[{"role": "user", "content": [{"type": "input_text", "text": "abcdefgh"}]},
               {"type": "function_call_output", "call_id": "c1", "output": "done"}]))
    assert request.stream and request.wants_usage_in_stream
    assert request.max_output_tokens == 99
    assert request.estimated_input_tokens == estimate_texts(["Be nice", "abcdefgh", "done"])
    assert parse_client_request("responses", body(model="m", input="four")).estimated_input_tokens == 1


def test_completions_fields_read():
    request = parse_client_request("completions", body(
        model="m", prompt=["abcd", "efghi"], stream=True,
        stream_options={"include_usage": False}, max_tokens=16))
    assert request.stream and not request.wants_usage_in_stream
    assert request.max_output_tokens == 16
    assert request.estimated_input_tokens == 1 + 2
    tokens = parse_client_request("completions", body(model="m", prompt=[[1, 2, 3], [4]]))
    assert tokens.estimated_input_tokens == 4


def test_estimate_heuristic():
    assert estimate_tokens("") == 0
    assert estimate_tokens("a") == 1
    assert estimate_tokens("abcd") == 1
    assert estimate_tokens("abcde") == 2
    assert estimate_tokens("日本語") == 3  # 9 UTF-8 bytes
    assert estimate_texts(["a", "b", ""]) == 2
