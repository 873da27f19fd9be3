"""Property: chat request -> Responses request -> chat request keeps the conversation.

Messages, roles, content parts, tool definitions, tool calls and tool results survive the
trip through the other format (compared in the neutral model, which ignores spellings that
mean the same thing, such as a one-part text list versus a plain string).

Generated conversations never hold two assistant messages in a row: the Responses format has
no boundary between an assistant message and the function calls that follow it, so such a
pair legitimately comes back as one assistant message carrying both.
"""

from __future__ import annotations

import itertools

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.protocols import chat
from gateway.protocols.request import parse_client_request
from gateway.protocols.translate import make_translator

TEXT = st.text(alphabet=st.characters(exclude_categories=("Cs",)), max_size=30)
NAME = st.from_regex(r"[A-Za-z_][A-Za-z0-9_-]{0,15}", fullmatch=True)
CALL_ID = st.from_regex(r"call_[A-Za-z0-9]{1,12}", fullmatch=True)
JSON_ARGS = st.dictionaries(NAME, st.integers(-2**53, 2**53) | TEXT, max_size=3).map(
    lambda value: orjson.dumps(value).decode())

text_part = TEXT.map(lambda text: {"type": "text", "text": text})
image_part = st.builds(
    lambda url, detail: {"type": "image_url",
                         "image_url": {"url": url} if detail is None
                         else {"url": url, "detail": detail}},
    st.sampled_from(["https://example.com/a.png", "data:image/png;base64,iVBORw0KGgo="]),
    st.sampled_from([None, "low", "high", "auto"]))

user_message = st.builds(
    lambda content: {"role": "user", "content": content},
    TEXT | st.lists(text_part | image_part, min_size=1, max_size=3))
system_message = st.builds(
    lambda role, content: {"role": role, "content": content},
    st.sampled_from(["system", "developer"]), TEXT | st.lists(text_part, min_size=1, max_size=2))
tool_call = st.builds(
    lambda call_id, name, arguments: {"id": call_id, "type": "function",
                                      "function": {"name": name, "arguments": arguments}},
    CALL_ID, NAME, JSON_ARGS)
assistant_message = st.builds(
    lambda content, calls: {"role": "assistant", "content": content,
                            **({"tool_calls": calls} if calls else {})},
    st.none() | TEXT, st.lists(tool_call, max_size=3))
tool_message = st.builds(lambda call_id, content: {"role": "tool", "tool_call_id": call_id,
                                                   "content": content}, CALL_ID, TEXT)


def no_assistant_pairs(messages: list[dict]) -> bool:
    return all(not (a["role"] == b["role"] == "assistant") for a, b in itertools.pairwise(messages))


messages_strategy = st.lists(
    st.one_of(user_message, system_message, assistant_message, tool_message),
    min_size=1, max_size=8).filter(no_assistant_pairs)

tool_definition = st.builds(
    lambda name, description, parameters, strict: {
        "type": "function",
        "function": {"name": name,
                     **({"description": description} if description is not None else {}),
                     **({"parameters": parameters} if parameters is not None else {}),
                     **({"strict": strict} if strict is not None else {})}},
    NAME, st.none() | TEXT,
    st.none() | st.just({"type": "object", "properties": {"q": {"type": "string"}}}),
    st.none() | st.booleans())

tool_choice = st.none() | st.sampled_from(["auto", "none", "required"]) | NAME.map(
    lambda name: {"type": "function", "function": {"name": name}})


def round_trip(body: dict) -> dict:
    request = parse_client_request("chat", orjson.dumps(body))
    as_responses = make_translator("chat", "responses", request, "resp-model").upstream_body()
    back = parse_client_request("responses", as_responses)
    return orjson.loads(make_translator("responses", "compat", back, "chat-model")
                        .upstream_body())


@settings(max_examples=300, deadline=None)
@given(messages=messages_strategy, tools=st.lists(tool_definition, max_size=3),
       choice=tool_choice)
def test_chat_to_responses_to_chat_keeps_the_conversation(messages, tools, choice):
    body: dict = {"model": "client-model", "messages": messages}
    if tools:
        body["tools"] = tools
    if choice is not None:
        body["tool_choice"] = choice
    result = round_trip(body)
    assert result["model"] == "chat-model"
    original, returned = chat.to_conversation(body), chat.to_conversation(result)
    assert returned.turns == original.turns
    assert [m["role"] for m in result["messages"]] == [m["role"] for m in messages]
    assert [m.get("tool_calls") for m in result["messages"]] == [
        m.get("tool_calls") for m in messages]
    assert [m.get("tool_call_id") for m in result["messages"]] == [
        m.get("tool_call_id") for m in messages]
    assert result.get("tools") == (tools or None)
    assert result.get("tool_choice") == choice
