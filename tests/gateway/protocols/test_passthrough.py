"""Same-format translators: verbatim bodies with only ``model`` swapped, usage read from the
stream, the usage-only chunk dropped for clients that did not ask for it.

Micro-benchmark (not a timed test).  ``bench()`` below times ``ChatPassthrough.stream_event``
on the 330-byte content chunk of chat_stream_text.sse, with a model swap::

    .venv/bin/python -m timeit -s "from tests.gateway.protocols.test_passthrough import bench; f = bench()" "f()"

Measured here (2 shared cores under load from parallel test runs: compare ratios only):
shipped path (one orjson.loads, text measured from the dict, model swapped by bytes.replace,
bytes relayed as received) ~2.0 µs per chunk; an orjson loads + modify + dumps round trip with
the same measuring ~2.0 µs (no measuring ~1.7 µs); a first version that avoided parsing with
pure-Python byte scanning cost ~2.7 µs.  On chunks this small orjson's C parser beats Python
byte tricks, so the path parses once and never re-serialises (the client gets the upstream's
exact bytes apart from the model name).
"""

from __future__ import annotations

import orjson
import pytest

from gateway.billing.usage import Usage
from gateway.protocols import bytescan
from gateway.protocols.request import parse_client_request
from gateway.protocols.sse import SSEEvent
from gateway.protocols.translate import make_translator
from tests.gateway.protocols.recorded import load_json, load_sse, payloads, raw


def chat_request(**extra):
    body = {"model": "my-model", "messages": [{"role": "user", "content": "hi"}],
            "logit_bias": {"1": 2}, "vendor_knob": [1, {"a": None}], **extra}
    return parse_client_request("chat", orjson.dumps(body))


def test_chat_body_keeps_unknown_fields_and_swaps_model():
    translator = make_translator("chat", "compat", chat_request(n=2, seed=3), "gpt-4o")
    assert translator.upstream_path() == b"/v1/chat/completions"
    sent = orjson.loads(translator.upstream_body())
    assert sent == {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}],
                    "logit_bias": {"1": 2}, "vendor_knob": [1, {"a": None}], "n": 2, "seed": 3}


def test_chat_body_untouched_when_nothing_changes():
    request = chat_request()
    assert make_translator("chat", "compat", request, "my-model").upstream_body() == request.raw


def test_stream_forces_include_usage_but_keeps_other_stream_options():
    request = chat_request(stream=True, stream_options={"include_obfuscation": False})
    sent = orjson.loads(make_translator("chat", "compat", request, "up").upstream_body())
    assert sent["stream_options"] == {"include_obfuscation": False, "include_usage": True}
    assert sent["stream"] is True
    asked = chat_request(stream=True, stream_options={"include_usage": True})
    assert make_translator("chat", "COMPAT", asked, "my-model").upstream_body() == asked.raw


def test_non_stream_answer_model_is_the_clients():
    translator = make_translator("chat", "compat", chat_request(), "gpt-4o-mini")
    answer = orjson.loads(translator.response(200, raw("chat_response_text.json")))
    original = load_json("chat_response_text.json")
    assert answer["model"] == "my-model"
    assert {k: v for k, v in answer.items() if k != "model"} == {
        k: v for k, v in original.items() if k != "model"}
    assert translator.usage == Usage(input=2006, output=300, cache_read=1920)
    assert translator.relayed_text_tokens() == 8  # "Paris is the capital of France." = 31 bytes


def test_non_json_answer_is_relayed_and_estimated():
    translator = make_translator("chat", "compat", chat_request(), "x")
    assert translator.response(200, b"plain words") == b"plain words"
    assert translator.usage is None
    assert translator.relayed_text_tokens() == 3


@pytest.mark.parametrize("include_usage", [False, True])
def test_chat_stream_passthrough(include_usage):
    request = chat_request(stream=True, stream_options={"include_usage": include_usage})
    translator = make_translator("chat", "compat", request, "gpt-4o-mini")
    frames: list[bytes] = []
    per_event = []
    for event in load_sse("chat_stream_text.sse"):
        out = translator.stream_event(event)
        per_event.append(len(out))
        frames.extend(out)
    frames.extend(translator.finish())
    # every upstream event is relayed at once (nothing buffered); only the usage chunk may drop
    assert per_event == [1, 1, 1, 1, 1 if include_usage else 0, 1]
    chunks = payloads(frames)
    assert chunks[-1] == "[DONE]" and chunks.count("[DONE]") == 1
    assert all(c["model"] == "my-model" for c in chunks[:-1])
    assert "".join(c["choices"][0]["delta"].get("content", "")
                   for c in chunks[:-1] if c["choices"]) == 'Hello, "world"!'
    assert translator.usage == Usage(input=19, output=5)
    assert translator.completed
    # 'Hello' + ', "world"!' = 5 + 10 bytes
    assert translator.relayed_text_tokens() == 4
    if include_usage:
        assert chunks[-2]["usage"]["total_tokens"] == 24 and chunks[-2]["choices"] == []


def test_missing_done_is_added_once_and_error_frames():
    translator = make_translator("chat", "compat", chat_request(stream=True), "m")
    events = load_sse("chat_stream_text.sse")[:2]
    for event in events:
        translator.stream_event(event)
    assert translator.usage is None and not translator.completed
    assert translator.finish() == [b"data: [DONE]\n\n"]
    assert translator.finish() == []
    failing = make_translator("chat", "compat", chat_request(stream=True), "m")
    failing.stream_event(events[0])
    frames = failing.error_frames("Upstream request failed", "upstream_error", "bad_gateway")
    assert payloads(frames) == [{"error": {"message": "Upstream request failed",
                                           "type": "upstream_error", "code": "bad_gateway",
                                           "param": None}}, "[DONE]"]
    assert failing.finish() == []


def test_completions_passthrough_stream_and_body():
    request = parse_client_request("completions", orjson.dumps(
        {"model": "legacy", "prompt": "Say this is a test", "stream": True, "echo": False}))
    translator = make_translator("completions", "compat", request, "gpt-3.5-turbo-instruct")
    assert translator.upstream_path() == b"/v1/completions"
    sent = orjson.loads(translator.upstream_body())
    assert sent["model"] == "gpt-3.5-turbo-instruct" and sent["echo"] is False
    assert sent["stream_options"] == {"include_usage": True}
    frames = [f for e in load_sse("completions_stream.sse") for f in translator.stream_event(e)]
    chunks = payloads(frames)
    assert [c if c == "[DONE]" else c["choices"][0]["text"] for c in chunks] == [
        "\n\n", "This is a test.", "[DONE]"]
    assert all(c["model"] == "legacy" for c in chunks[:-1])
    assert translator.usage == Usage(input=4, output=6)
    plain = make_translator("completions", "compat", parse_client_request(
        "completions", orjson.dumps({"model": "legacy", "prompt": "x"})), "up")
    answer = orjson.loads(plain.response(200, raw("completions_response.json")))
    assert answer["object"] == "text_completion" and answer["model"] == "legacy"
    assert plain.usage == Usage(input=5, output=7)


def test_responses_passthrough_stream():
    request = parse_client_request("responses", orjson.dumps(
        {"model": "my-model", "input": "hi", "stream": True, "include": ["reasoning"]}))
    translator = make_translator("responses", "responses", request, "gpt-4.1")
    assert translator.upstream_path() == b"/v1/responses"
    sent = orjson.loads(translator.upstream_body())
    assert sent == {"model": "gpt-4.1", "input": "hi", "stream": True, "include": ["reasoning"]}
    frames = []
    for event in load_sse("responses_stream_text.sse"):
        out = translator.stream_event(event)
        assert len(out) == 1
        frames.extend(out)
    assert translator.finish() == []
    events = payloads(frames)
    assert events[0]["type"] == "response.created"
    assert events[0]["response"]["model"] == "my-model"
    assert events[-1]["response"]["model"] == "my-model"
    assert translator.usage == Usage(input=37, output=11)
    assert translator.completed
    assert translator.relayed_text_tokens() == 5  # 'Hi' + ' there "friend"' = 2 + 15 bytes
    assert translator.error_frames("x", "upstream_error", None) == []


def test_responses_passthrough_error_after_start_and_body():
    request = parse_client_request("responses", orjson.dumps(
        {"model": "my-model", "input": "hi", "stream": True}))
    translator = make_translator("responses", "responses", request, "gpt-4.1")
    for event in load_sse("responses_stream_text.sse")[:4]:
        translator.stream_event(event)
    (frame,) = translator.error_frames("Upstream request failed", "upstream_error", None)
    assert frame.startswith(b"event: error\n")
    assert payloads([frame]) == [{"type": "error", "code": "upstream_error",
                                  "message": "Upstream request failed", "param": None,
                                  "sequence_number": 4}]
    plain = make_translator("responses", "responses", parse_client_request(
        "responses", orjson.dumps({"model": "my-model", "input": "hi"})), "gpt-4.1")
    answer = orjson.loads(plain.response(200, raw("responses_response_text.json")))
    assert answer["model"] == "my-model" and answer["output"][1]["type"] == "message"
    assert plain.usage == Usage(input=1036, output=87, cache_read=1024, reasoning=30)


def test_bytescan():
    data = b'{"a":"x","content":"he said \\"hi\\" \\\\","model": "gpt","content":null}'
    assert bytescan.string_value_field(data, b'"model":') == b'"model": "gpt"'
    assert bytescan.replace_string_value(data, b'"model":', b'"mine"') == \
        data.replace(b'"model": "gpt"', b'"model": "mine"')
    assert bytescan.replace_string_value(data, b'"absent":', b'"x"') == data
    # a key-like text inside a string is escaped, so it never matches
    tricky = b'{"content":"\\"model\\":\\"leak\\"","model":"up"}'
    assert bytescan.replace_string_value(tricky, b'"model":', b'"me"') == \
        b'{"content":"\\"model\\":\\"leak\\"","model":"me"}'


def test_text_measure_counts_decoded_text():
    translator = make_translator("chat", "compat", chat_request(stream=True), "m")
    chunk = (b'{"model":"m","choices":[{"index":0,"delta":{"content": "a\\"b\\\\",'
             b'"tool_calls":[{"index":0,"function":{"arguments":"{\\"x\\":1}"}}]}}]}')
    translator.stream_event(SSEEvent(chunk))
    # decoded: a"b\\ is 4 bytes and {"x":1} is 7
    assert translator.relayed_text_tokens() == 3  # ceil(11 / 4)


def bench():
    """The micro-benchmark named in the module docstring."""
    request = chat_request(stream=True)
    translator = make_translator("chat", "compat", request, "gpt-4o-mini")
    event = load_sse("chat_stream_text.sse")[1]
    assert isinstance(event, SSEEvent)
    return lambda: translator.stream_event(event)


def test_upstream_error_event_is_not_a_completion():
    translator = make_translator("chat", "compat", chat_request(stream=True), "m")
    translator.stream_event(load_sse("chat_stream_text.sse")[0])
    error = SSEEvent(b'{"error":{"message":"overloaded","type":"server_error","code":null}}')
    assert len(translator.stream_event(error)) == 1  # relayed as the upstream sent it
    assert translator.stream_event(SSEEvent(b"[DONE]")) == [b"data: [DONE]\n\n"]
    assert not translator.completed
    assert translator.finish() == [] and translator.error_frames("x", "y", None) == []

    request = parse_client_request("responses", orjson.dumps(
        {"model": "my-model", "input": "hi", "stream": True}))
    responses = make_translator("responses", "responses", request, "gpt-4.1")
    responses.stream_event(load_sse("responses_stream_text.sse")[0])
    failed = {"type": "response.failed", "sequence_number": 1,
              "response": {"id": "r", "status": "failed", "model": "gpt-4.1",
                           "error": {"code": "server_error", "message": "boom"}}}
    (frame,) = responses.stream_event(SSEEvent(orjson.dumps(failed), "response.failed"))
    assert payloads([frame])[0]["response"]["model"] == "my-model"
    assert not responses.completed
    assert responses.error_frames("x", "y", None) == []


def test_a_channel_type_spelled_many_ways_picks_the_same_translator_every_time():
    """``make_translator`` keeps each stored spelling's normalised type: the kept answer must
    be the one ``normalise_channel_type`` gives, on the first call and every later one."""
    from gateway.channels.channel_types import normalise_channel_type

    spellings = ["compat", "OpenAI", " open_ai ", "anthropic", "Anthropic", "claude",
                 "gemini", "unknown-kind", ""]
    for _ in range(2):
        for spelling in spellings:
            translator = make_translator("chat", spelling, chat_request(), "up")
            fresh = make_translator("chat", normalise_channel_type(spelling), chat_request(),
                                    "up")
            assert type(translator) is type(fresh), spelling
            assert translator.upstream_path() == fresh.upstream_path(), spelling
