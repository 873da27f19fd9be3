"""Property: whatever JSON arrives, translators fail only in their documented ways.

A client body can only produce ``ProtocolError`` (a 400); an upstream answer or stream event
can only produce ``UpstreamFormatError`` (a 502) on converting paths, and nothing at all on
passthrough paths (the bytes are relayed).  Anything else would be a 500.
"""

from __future__ import annotations

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gateway.protocols.errors import ProtocolError, UpstreamFormatError
from gateway.protocols.request import parse_client_request
from gateway.protocols.sse import SSEEvent
from gateway.protocols.translate import make_translator

KEYS = ["model", "messages", "input", "prompt", "stream", "stream_options", "include_usage",
        "max_tokens", "max_completion_tokens", "max_output_tokens", "tools", "tool_choice",
        "role", "content", "type", "text", "image_url", "url", "tool_calls", "function", "name",
        "arguments", "id", "call_id", "output", "instructions", "n", "choices", "delta", "usage",
        "prompt_tokens", "completion_tokens", "input_tokens", "output_tokens", "response",
        "status", "item", "output_index", "finish_reason", "message", "error", "index",
        "response_format", "text", "format", "reasoning", "stop", "tool_call_id", "file"]
SCALARS = (st.none() | st.booleans() | st.integers(-5, 5) | st.floats(allow_nan=False, width=32)
           | st.sampled_from(["", "user", "assistant", "tool", "system", "function", "text",
                              "image_url", "function_call", "function_call_output", "message",
                              "input_text", "response.completed", "response.created",
                              "response.output_item.added", "stop", "length", "m", "[DONE]"]))
JSON = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=4)
                    | st.dictionaries(st.sampled_from(KEYS), inner, max_size=6), max_leaves=25)
OBJECTS = st.dictionaries(st.sampled_from(KEYS), JSON, max_size=8)
PAIRS = [("chat", "compat"), ("chat", "responses"), ("responses", "responses"),
         ("responses", "compat"), ("completions", "compat"), ("completions", "responses")]
FUZZ = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FUZZ
@given(body=OBJECTS, model=st.sampled_from(["m", None]))
def test_client_bodies_fail_only_with_protocol_errors(body, model):
    if model:
        body["model"] = model
    raw = orjson.dumps(body)
    for family, channel in PAIRS:
        try:
            request = parse_client_request(family, raw)
            make_translator(family, channel, request, "up").upstream_body()
        except ProtocolError as exc:
            assert 400 <= exc.status < 500


GOOD = {"chat": {"model": "m", "messages": [{"role": "user", "content": "x"}]},
        "responses": {"model": "m", "input": "x"},
        "completions": {"model": "m", "prompt": "x"}}


@FUZZ
@given(answer=JSON, events=st.lists(OBJECTS, max_size=5), stream=st.booleans())
def test_upstream_answers_fail_only_with_format_errors(answer, events, stream):
    for family, channel in PAIRS:
        request = parse_client_request(family, orjson.dumps({**GOOD[family], "stream": stream}))
        translator = make_translator(family, channel, request, "up")
        passthrough = (family, channel) in {("chat", "compat"), ("completions", "compat"),
                                            ("responses", "responses")}
        try:
            assert isinstance(translator.response(200, orjson.dumps(answer)), bytes)
            for event in events:
                for frame in translator.stream_event(SSEEvent(orjson.dumps(event))):
                    assert frame.endswith(b"\n\n")
            translator.finish()
        except UpstreamFormatError:
            assert not passthrough
