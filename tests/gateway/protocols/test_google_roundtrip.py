"""Property: a Google generateContent request translated to another format and back keeps its
meaning.

Google -> chat (compat) -> Google, Google -> Messages -> Google and Google -> Responses ->
Google: system instruction, turns, text, images, function declarations, function calls and
responses (paired again by name and order, Google has no call ids), tool config and
generation settings survive, compared in the neutral model.

Generated conversations alternate user and model contents; a user content that answers
function calls holds only function responses (what the Gemini API expects).
"""

from __future__ import annotations

from typing import Any

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.protocols import google
from gateway.protocols.translate import make_translator
from tests.gateway.protocols.test_google import google_request
from tests.gateway.protocols.test_messages import client_request
from tests.gateway.protocols.test_messages_roundtrip import ARGS, NAME, TEXT

text_part = TEXT.map(lambda text: {"text": text})
image_part = st.sampled_from([
    {"inlineData": {"mimeType": "image/png", "data": "iVBORw0KGgo="}},
    {"fileData": {"mimeType": "image/jpeg", "fileUri": "https://example.com/a.jpg"}},
])
RESPONSE = st.dictionaries(NAME, st.integers(-1000, 1000) | TEXT, max_size=2) | TEXT.map(
    lambda text: {"result": text})


@st.composite
def conversations(draw: Any) -> list[dict[str, Any]]:
    contents: list[dict[str, Any]] = []
    for i in range(draw(st.integers(1, 6))):
        previous_calls = [p["functionCall"]["name"] for p in contents[-1]["parts"]
                          if "functionCall" in p] if contents else []
        if i % 2 == 0 and previous_calls:
            contents.append({"role": "user", "parts": [
                {"functionResponse": {"name": name, "response": draw(RESPONSE)}}
                for name in previous_calls]})
        elif i % 2 == 0:
            contents.append({"role": "user", "parts": draw(st.lists(
                text_part | image_part, min_size=1, max_size=3))})
        else:
            texts = draw(st.lists(text_part, max_size=2))
            calls = draw(st.lists(st.builds(lambda n, a: {"functionCall": {"name": n,
                                                                           "args": a}},
                                            NAME, ARGS), max_size=2))
            contents.append({"role": "model", "parts": texts + calls or [{"text": ""}]})
    return contents


declaration = st.builds(
    lambda name, description: {"name": name, "parameters": {
        "type": "object", "properties": {"q": {"type": "string"}}},
        **({"description": description} if description is not None else {})},
    NAME, st.none() | TEXT)
tool_config = st.none() | st.sampled_from(["AUTO", "ANY", "NONE"]).map(
    lambda mode: {"functionCallingConfig": {"mode": mode}}) | NAME.map(
    lambda name: {"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": [name]}})


def round_trip(body: dict[str, Any], via: tuple[str, str]) -> dict[str, Any]:
    channel, family = via
    there = make_translator("google", channel, google_request(body), "other-model")
    middle = orjson.loads(there.upstream_body())
    middle.setdefault("model", "other-model")
    back = make_translator(family, "modelaction", client_request(family, middle),
                           "gemini-model")
    assert back.upstream_path() == b"/v1beta/models/gemini-model:generateContent"
    return orjson.loads(back.upstream_body())


@settings(max_examples=150, deadline=None)
@given(contents=conversations(), declarations=st.lists(declaration, max_size=2),
       config=tool_config, system=st.none() | st.lists(text_part, min_size=1, max_size=2),
       via=st.sampled_from([("compat", "chat"), ("messages", "messages"),
                            ("responses", "responses")]),
       max_output=st.none() | st.integers(1, 10_000),
       top_p=st.none() | st.floats(0, 1, allow_nan=False),
       stop=st.none() | st.lists(NAME, min_size=1, max_size=2))
def test_google_there_and_back_keeps_the_meaning(contents, declarations, config, system, via,
                                                 max_output, top_p, stop) -> None:
    body: dict[str, Any] = {"contents": contents}
    if system:
        body["systemInstruction"] = {"parts": system}
    if declarations:
        body["tools"] = [{"functionDeclarations": declarations}]
    if config is not None:
        body["toolConfig"] = config
    generation = {k: v for k, v in (("maxOutputTokens", max_output), ("topP", top_p),
                                    ("stopSequences", stop)) if v is not None}
    if generation:
        body["generationConfig"] = generation
    result = round_trip(body, via)
    original, returned = google.to_conversation(body), google.to_conversation(result)
    assert returned.turns == original.turns
    assert returned.tools == original.tools
    assert (returned.tool_choice, returned.forced_tool) == (original.tool_choice,
                                                            original.forced_tool)
    assert returned.top_p == original.top_p
    if via[0] != "responses":  # Responses has no stop sequences
        assert returned.stop == original.stop
    if via[0] != "messages":  # Messages always sets an output cap
        assert returned.max_output_tokens == original.max_output_tokens
