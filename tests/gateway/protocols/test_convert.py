"""chat <-> Responses conversion, non-stream: request mapping (§9.2) and answer mapping (§9.3).

Converted answers are checked against the official SDK's own models (``openai`` types,
pydantic), so a shape an SDK cannot read fails here.
"""

from __future__ import annotations

import orjson
import pytest
from openai.types import Completion
from openai.types.chat import ChatCompletion
from openai.types.responses import Response

from gateway.billing.usage import Usage
from gateway.protocols.errors import ProtocolError, UpstreamFormatError
from gateway.protocols.request import parse_client_request
from gateway.protocols.translate import make_translator
from tests.gateway.protocols.recorded import raw


def chat_to_responses(body: dict):
    request = parse_client_request("chat", orjson.dumps(body))
    return make_translator("chat", "responses", request, "gpt-4.1")


def responses_to_chat(body: dict):
    request = parse_client_request("responses", orjson.dumps(body))
    return make_translator("responses", "compat", request, "gpt-4o")


def test_chat_request_to_responses_request():
    translator = chat_to_responses(orjson.loads(raw("chat_request_full.json")))
    assert translator.upstream_path() == b"/v1/responses"
    sent = orjson.loads(translator.upstream_body())
    assert sent["model"] == "gpt-4.1"
    assert sent["input"] == [
        {"type": "message", "role": "system",
         "content": [{"type": "input_text", "text": "You are terse."}]},
        {"type": "message", "role": "user", "content": [
            {"type": "input_text", "text": "What is in this image, and what's the weather there?"},
            {"type": "input_image", "image_url": "https://example.com/paris.jpg",
             "detail": "low"}]},
        {"type": "message", "role": "assistant",
         "content": [{"type": "output_text", "text": "Let me check."}]},
        {"type": "function_call", "call_id": "call_abc", "name": "get_weather",
         "arguments": '{"city":"Paris"}'},
        {"type": "function_call_output", "call_id": "call_abc", "output": '{"temp_c": 18}'},
        {"type": "message", "role": "assistant",
         "content": [{"type": "output_text", "text": "It is the Eiffel Tower; 18 °C."}]},
        {"type": "message", "role": "user", "content": [{"type": "input_text",
                                                         "text": "Thanks!"}]},
    ]
    assert sent["tools"] == [{"type": "function", "name": "get_weather",
                              "description": "Current weather",
                              "parameters": {"type": "object",
                                             "properties": {"city": {"type": "string"}},
                                             "required": ["city"]},
                              "strict": True}]
    assert sent["tool_choice"] == {"type": "function", "name": "get_weather"}
    assert sent["max_output_tokens"] == 256
    assert sent["temperature"] == 0.2 and sent["top_p"] == 0.9
    assert sent["text"] == {"format": {"type": "json_schema", "name": "answer",
                                       "schema": {"type": "object"}, "strict": True}}
    assert sent["store"] is False
    assert "stop" not in sent and "logit_bias" not in sent and "stream" not in sent


def test_responses_request_to_chat_request():
    translator = responses_to_chat({
        "model": "client-model", "instructions": "Answer in French.",
        "input": [
            {"role": "user", "content": [
                {"type": "input_text", "text": "Describe"},
                {"type": "input_image", "image_url": "data:image/png;base64,iVBORw0KGgo=",
                 "detail": "high"}]},
            {"type": "reasoning", "id": "rs_1", "summary": []},
            {"type": "function_call", "call_id": "call_1", "name": "lookup",
             "arguments": '{"q":"x"}'},
            {"type": "function_call", "call_id": "call_2", "name": "lookup",
             "arguments": '{"q":"y"}'},
            {"type": "function_call_output", "call_id": "call_1", "output": "X"},
            {"type": "function_call_output", "call_id": "call_2",
             "output": [{"type": "input_text", "text": "Y"}]},
            {"role": "assistant", "content": "Done."},
            {"role": "developer", "content": "Be brief."},
        ],
        "tools": [{"type": "function", "name": "lookup", "parameters": {"type": "object"}}],
        "tool_choice": "required", "max_output_tokens": 100, "temperature": 0.5,
        "text": {"format": {"type": "json_object"}}, "reasoning": {"effort": "low"},
        "parallel_tool_calls": False,
    })
    assert translator.upstream_path() == b"/v1/chat/completions"
    sent = orjson.loads(translator.upstream_body())
    assert sent == {
        "model": "gpt-4o",
        "messages": [
            {"role": "system", "content": "Answer in French."},
            {"role": "user", "content": [
                {"type": "text", "text": "Describe"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo=",
                                                    "detail": "high"}}]},
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "call_1", "type": "function",
                 "function": {"name": "lookup", "arguments": '{"q":"x"}'}},
                {"id": "call_2", "type": "function",
                 "function": {"name": "lookup", "arguments": '{"q":"y"}'}}]},
            {"role": "tool", "tool_call_id": "call_1", "content": "X"},
            {"role": "tool", "tool_call_id": "call_2", "content": "Y"},
            {"role": "assistant", "content": "Done."},
            {"role": "developer", "content": "Be brief."},
        ],
        "tools": [{"type": "function", "function": {"name": "lookup",
                                                    "parameters": {"type": "object"}}}],
        "tool_choice": "required",
        "max_tokens": 100, "temperature": 0.5, "parallel_tool_calls": False,
        "reasoning_effort": "low", "response_format": {"type": "json_object"},
    }


def test_string_input_and_stream_flags():
    sent = orjson.loads(responses_to_chat({"model": "m", "input": "Hello", "stream": True})
                        .upstream_body())
    assert sent["messages"] == [{"role": "user", "content": "Hello"}]
    assert sent["stream"] is True and sent["stream_options"] == {"include_usage": True}
    sent = orjson.loads(chat_to_responses({"model": "m", "stream": True, "messages": [
        {"role": "user", "content": "Hi"}]}).upstream_body())
    assert sent["stream"] is True and "stream_options" not in sent


@pytest.mark.parametrize("family, body, message", [
    ("chat", {"messages": [{"role": "user", "content": [
        {"type": "input_audio", "input_audio": {"data": "AAA", "format": "wav"}}]}]},
     "content part type 'input_audio' is not supported by this channel"),
    ("chat", {"messages": [{"role": "user", "content": "x"}],
              "tools": [{"type": "custom", "custom": {"name": "c"}}]},
     "only function tools can be converted for this channel"),
    ("chat", {"messages": [{"role": "function", "name": "f", "content": "x"}]},
     "message role 'function' is not supported by this channel"),
    ("chat", {"messages": [{"role": "user", "content": "x"}], "n": 2},
     "n > 1 is not supported by this channel"),
    ("chat", {"messages": [{"role": "tool", "content": "x"}]},
     "tool messages need a tool_call_id"),
    ("responses", {"input": [{"type": "web_search_call", "id": "ws"}]},
     "input item type 'web_search_call' is not supported by this channel"),
    ("responses", {"input": "x", "tools": [{"type": "web_search"}]},
     "only function tools can be converted for this channel"),
    ("responses", {"input": []}, "input is required"),
    ("responses", {}, "input is required"),
    ("responses", {"input": "x", "tool_choice": {"type": "file_search"}},
     "tool_choice cannot be converted for this channel"),
])
def test_unconvertible_requests_are_400(family, body, message):
    request = parse_client_request(family, orjson.dumps({"model": "m", **body}))
    channel = "responses" if family == "chat" else "compat"
    with pytest.raises(ProtocolError) as caught:
        make_translator(family, channel, request, "up")
    assert caught.value.status == 400 and caught.value.message == message


def test_unsupported_pairs_are_400():
    request = parse_client_request("chat", orjson.dumps({"model": "m", "messages": [
        {"role": "user", "content": "x"}]}))
    for channel in ("imgvideo", "compat-video", "artjob"):
        with pytest.raises(ProtocolError) as caught:
            make_translator("chat", channel, request, "up")
        assert caught.value.message == f"unsupported upstream protocol: {channel}"
    completions = parse_client_request("completions", orjson.dumps({"model": "m",
                                                                    "prompt": "x"}))
    with pytest.raises(ProtocolError):
        make_translator("completions", "imgvideo", completions, "up")


# -- answers -------------------------------------------------------------------------------

def test_chat_answer_with_tool_calls_to_responses():
    translator = responses_to_chat({"model": "client-model", "input": "weather?",
                                    "tools": [{"type": "function", "name": "get_weather"}]})
    body = orjson.loads(translator.response(200, raw("chat_response_tools.json")))
    Response.model_validate(body)
    assert body["model"] == "client-model"
    assert body["status"] == "completed" and body["incomplete_details"] is None
    assert body["id"] == "resp_chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG"
    assert body["created_at"] == 1760000200
    assert [(i["type"], i["call_id"], i["name"], i["arguments"]) for i in body["output"]] == [
        ("function_call", "call_62136354", "get_weather", '{"city": "Paris"}'),
        ("function_call", "call_62136355", "get_time", '{"tz": "CET"}')]
    assert body["tools"] == [{"type": "function", "name": "get_weather"}]
    assert body["usage"]["input_tokens"] == 82 and body["usage"]["output_tokens"] == 17
    assert body["usage"]["total_tokens"] == 99
    assert translator.usage == Usage(input=82, output=17)


def test_chat_answer_length_to_responses_incomplete():
    translator = responses_to_chat({"model": "client-model", "input": "capital?"})
    body = orjson.loads(translator.response(200, raw("chat_response_text.json")))
    Response.model_validate(body)
    assert body["status"] == "incomplete"
    assert body["incomplete_details"] == {"reason": "max_output_tokens"}
    assert body["output"][0]["content"][0]["text"] == "Paris is the capital of France."
    assert body["output_text"] == "Paris is the capital of France."
    assert body["usage"]["input_tokens_details"]["cached_tokens"] == 1920
    assert translator.usage == Usage(input=2006, output=300, cache_read=1920)
    assert translator.relayed_text_tokens() == 8


def test_responses_answer_to_chat():
    translator = chat_to_responses({"model": "client-model", "messages": [
        {"role": "user", "content": "story"}]})
    body = orjson.loads(translator.response(200, raw("responses_response_text.json")))
    ChatCompletion.model_validate(body)
    assert body["object"] == "chat.completion" and body["model"] == "client-model"
    choice = body["choices"][0]
    assert choice["finish_reason"] == "stop"
    assert choice["message"]["content"].startswith("In a peaceful grove")
    assert body["usage"]["prompt_tokens"] == 1036
    assert body["usage"]["prompt_tokens_details"]["cached_tokens"] == 1024
    assert body["usage"]["completion_tokens_details"]["reasoning_tokens"] == 30
    assert translator.usage == Usage(input=1036, output=87, cache_read=1024, reasoning=30)


def test_responses_tool_call_answer_to_chat():
    translator = chat_to_responses({"model": "client-model", "messages": [
        {"role": "user", "content": "weather?"}]})
    body = orjson.loads(translator.response(200, raw("responses_response_tool.json")))
    ChatCompletion.model_validate(body)
    choice = body["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    assert choice["message"]["content"] is None
    assert choice["message"]["tool_calls"] == [
        {"id": "call_12345xyz", "type": "function",
         "function": {"name": "get_weather", "arguments": '{"city":"Paris, France"}'}}]


@pytest.mark.parametrize("status, details, expected", [
    ("completed", None, "stop"),
    ("incomplete", {"reason": "max_output_tokens"}, "length"),
    ("incomplete", {"reason": "content_filter"}, "content_filter"),
])
def test_finish_reasons_responses_to_chat(status, details, expected):
    answer = orjson.loads(raw("responses_response_incomplete.json"))
    answer.update(status=status, incomplete_details=details)
    translator = chat_to_responses({"model": "m", "messages": [{"role": "user",
                                                                "content": "x"}]})
    body = orjson.loads(translator.response(200, orjson.dumps(answer)))
    assert body["choices"][0]["finish_reason"] == expected


@pytest.mark.parametrize("reason, status, details", [
    ("stop", "completed", None),
    ("tool_calls", "completed", None),
    ("function_call", "completed", None),
    ("length", "incomplete", {"reason": "max_output_tokens"}),
    ("content_filter", "incomplete", {"reason": "content_filter"}),
])
def test_finish_reasons_chat_to_responses(reason, status, details):
    answer = orjson.loads(raw("chat_response_text.json"))
    answer["choices"][0]["finish_reason"] = reason
    body = orjson.loads(responses_to_chat({"model": "m", "input": "x"})
                        .response(200, orjson.dumps(answer)))
    assert (body["status"], body["incomplete_details"]) == (status, details)


@pytest.mark.parametrize("answer", [b"not json", b"[]", b'{"choices": "x"}',
                                    b'{"choices": [{"message": 3}]}'])
def test_unreadable_chat_answers(answer):
    with pytest.raises(UpstreamFormatError):
        responses_to_chat({"model": "m", "input": "x"}).response(200, answer)


@pytest.mark.parametrize("answer", [b'{"output": 1}', b'{"status": "failed", "output": []}',
                                    b'{"output": [{"type": "function_call"}]}'])
def test_unreadable_responses_answers(answer):
    with pytest.raises(UpstreamFormatError):
        chat_to_responses({"model": "m", "messages": [{"role": "user", "content": "x"}]}
                          ).response(200, answer)


# -- legacy completions on a Responses channel (§8.2) -----------------------------------------

def completions_to_responses(**body):
    request = parse_client_request("completions", orjson.dumps({"model": "legacy", **body}))
    return make_translator("completions", "responses", request, "gpt-4.1")


def test_completions_prompt_becomes_one_user_message():
    translator = completions_to_responses(prompt=["Say this is a test"], max_tokens=7,
                                          stop="\n", temperature=0)
    sent = orjson.loads(translator.upstream_body())
    assert sent["input"] == [{"type": "message", "role": "user", "content": [
        {"type": "input_text", "text": "Say this is a test"}]}]
    assert sent["max_output_tokens"] == 7 and sent["temperature"] == 0
    body = orjson.loads(translator.response(200, raw("responses_response_incomplete.json")))
    Completion.model_validate(body)
    assert body["object"] == "text_completion" and body["model"] == "legacy"
    assert body["choices"] == [{"text": "Once upon a", "index": 0, "logprobs": None,
                                "finish_reason": "length"}]
    assert body["usage"]["prompt_tokens"] == 10 and body["usage"]["completion_tokens"] == 16


@pytest.mark.parametrize("body, message", [
    ({"prompt": ["a", "b"]}, "only a single text prompt can be converted for this channel"),
    ({"prompt": [[1, 2]]}, "only a single text prompt can be converted for this channel"),
    ({}, "only a single text prompt can be converted for this channel"),
    ({"prompt": "x", "echo": True}, "echo is not supported by this channel"),
    ({"prompt": "x", "best_of": 3}, "best_of is not supported by this channel"),
    ({"prompt": "x", "n": 2}, "n > 1 is not supported by this channel"),
])
def test_unconvertible_completions(body, message):
    with pytest.raises(ProtocolError) as caught:
        completions_to_responses(**body)
    assert caught.value.message == message
