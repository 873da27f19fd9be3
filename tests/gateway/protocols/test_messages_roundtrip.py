"""Property: a Messages request translated to another format and back keeps its meaning.

Messages -> chat (compat) -> Messages, Messages -> Responses -> Messages and Messages ->
Google -> Messages: system prompt, turns, text, images, tool definitions, tool calls, tool
results, tool choice and sampling settings survive (compared in the neutral model, which
ignores spellings that mean the same thing, such as one text block versus a plain string).

Generated conversations alternate user and assistant messages, as the Messages API requires;
a user message's tool results come before its other blocks (the only order the other
formats can express).
"""

from __future__ import annotations

from typing import Any

import orjson
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from gateway.protocols import messages
from gateway.protocols.conversation import Text, Turn
from gateway.protocols.translate import make_translator
from tests.gateway.protocols.test_messages import client_request

TEXT = st.text(alphabet=st.characters(exclude_categories=("Cs",)), max_size=20)
NAME = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,12}", fullmatch=True)
TOOL_ID = st.from_regex(r"toolu_[A-Za-z0-9]{1,10}", fullmatch=True)
ARGS = st.dictionaries(NAME, st.integers(-2**53, 2**53) | TEXT | st.booleans(), max_size=3)

text_block = TEXT.map(lambda text: {"type": "text", "text": text})
image_block = st.sampled_from([
    {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                 "data": "iVBORw0KGgo="}},
    {"type": "image", "source": {"type": "url", "url": "https://example.com/a.jpg"}},
])
tool_use = st.builds(lambda i, n, a: {"type": "tool_use", "id": i, "name": n, "input": a},
                     TOOL_ID, NAME, ARGS)
tool_result = st.builds(
    lambda i, content: {"type": "tool_result", "tool_use_id": i, "content": content},
    TOOL_ID, TEXT | st.lists(text_block, min_size=1, max_size=2))

user_message = st.builds(
    lambda results, content: {"role": "user", "content": results + content},
    st.lists(tool_result, max_size=2),
    st.lists(text_block | image_block, min_size=1, max_size=3)) | TEXT.map(
    lambda text: {"role": "user", "content": text})
assistant_message = st.builds(
    lambda texts, calls: {"role": "assistant", "content": texts + calls},
    st.lists(text_block, max_size=2), st.lists(tool_use, max_size=2)).filter(
    lambda m: m["content"]) | TEXT.map(lambda text: {"role": "assistant", "content": text})


@st.composite
def conversations(draw: Any) -> list[dict[str, Any]]:
    count = draw(st.integers(1, 6))
    return [draw(user_message if i % 2 == 0 else assistant_message) for i in range(count)]


tool = st.builds(
    lambda name, description: {"name": name, "input_schema": {
        "type": "object", "properties": {"q": {"type": "string"}}},
        **({"description": description} if description is not None else {})},
    NAME, st.none() | TEXT)
tool_choice = st.none() | st.sampled_from([{"type": "auto"}, {"type": "any"},
                                           {"type": "none"}]) | NAME.map(
    lambda name: {"type": "tool", "name": name})
system = st.none() | TEXT | st.lists(text_block, min_size=1, max_size=2)


def round_trip(body: dict[str, Any], via: tuple[str, str]) -> dict[str, Any]:
    channel, family = via
    there = make_translator("messages", channel, client_request("messages", body),
                            "other-model").upstream_body()
    middle = orjson.loads(there)
    middle.setdefault("model", "other-model")
    back = make_translator(family, "messages", client_request(family, middle),
                           "claude-model")
    return orjson.loads(back.upstream_body())


def normalised(turns: list[Turn]) -> list[Turn]:
    """Tool results compared by their text: Responses and Google carry one string."""
    return [Turn(t.role, [Text(t.text())], t.tool_calls, t.tool_call_id) if t.role == "tool"
            else t for t in turns]


@settings(max_examples=150, deadline=None)
@given(conversation=conversations(), tools=st.lists(tool, max_size=2), choice=tool_choice,
       system_prompt=system, via=st.sampled_from([("compat", "chat"), ("responses", "responses"),
                                                  ("modelaction", "google")]),
       max_tokens=st.integers(1, 10_000),
       temperature=st.none() | st.floats(0, 1, allow_nan=False))
def test_messages_there_and_back_keeps_the_meaning(conversation, tools, choice, system_prompt,
                                                   via, max_tokens, temperature) -> None:
    body: dict[str, Any] = {"model": "claude-client", "max_tokens": max_tokens,
                            "messages": conversation}
    if system_prompt:
        body["system"] = system_prompt
    if tools:
        body["tools"] = tools
    if choice is not None:
        body["tool_choice"] = choice
    if temperature is not None:
        body["temperature"] = temperature
    result = round_trip(body, via)
    assert result["model"] == "claude-model"
    original, returned = messages.to_conversation(body), messages.to_conversation(result)
    if via[0] == "modelaction":
        # Google has no call ids: calls and results are paired again by name and order, so
        # a turn calling one tool twice whose results answer them out of order (or only the
        # second) cannot be expressed there -- not a meaning the translator can keep
        assume(all(len({c.name for c in t.tool_calls}) == len(t.tool_calls)
                   for t in original.turns))
        original_ids = [c.id for t in original.turns for c in t.tool_calls]
        returned_ids = [c.id for t in returned.turns for c in t.tool_calls]
        rename = dict(zip(returned_ids, original_ids, strict=True))
        for turn in returned.turns:
            turn.tool_calls = [type(c)(rename[c.id], c.name, c.arguments)
                               for c in turn.tool_calls]
        for turn, before in zip(returned.turns, original.turns, strict=False):
            if turn.role == "tool" and before.role == "tool":
                turn.tool_call_id = rename.get(turn.tool_call_id or "", before.tool_call_id)
    assert normalised(returned.turns) == normalised(original.turns)
    assert returned.tools == original.tools
    assert (returned.tool_choice, returned.forced_tool) == (
        original.tool_choice, original.forced_tool)
    assert returned.max_output_tokens == max_tokens
    assert returned.temperature == original.temperature
