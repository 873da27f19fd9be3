"""The variables a meta-model condition may read, their kinds, and how a request fills them.

The table is contract §6.3's.  ``judge.answer`` exists only inside a ``judge``'s route.
Request variables come from the raw JSON body of any text family (chat, completions,
responses, messages, Google ``contents``), so one program routes every family alike.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from decimal import Decimal
from typing import Any

from gateway.protocols.estimate import tokens_for_bytes

NUMBER, STRING, BOOL = "number", "string", "bool"

KINDS: dict[str, str] = {
    "request.input_tokens": NUMBER,
    "request.max_output_tokens": NUMBER,
    "request.total_estimated_tokens": NUMBER,
    "request.message_count": NUMBER,
    "request.text": STRING,
    "request.last_user_message": STRING,
    "request.system": STRING,
    "request.has_image": BOOL,
    "request.has_audio": BOOL,
    "request.has_tools": BOOL,
    "request.tool_count": NUMBER,
    "request.stream": BOOL,
    "request.temperature": NUMBER,
    "user.balance": NUMBER,
    "user.id": NUMBER,
    "user.group": STRING,
    "user.is_admin": BOOL,
    "api_key.name": STRING,
    "api_key.quota_limit": NUMBER,
    "api_key.quota_remaining": NUMBER,
    "channel.name": STRING,
}
JUDGE_ANSWER = "judge.answer"

IMAGE_KEYS = frozenset({"image", "image_url", "images"})
AUDIO_KEYS = frozenset({"audio", "input_audio", "audio_url"})
TOOL_KEYS = frozenset({"tools", "tool_choice", "function_call", "functions"})
#: nesting walked when looking for keys: deeper bodies are not real requests
MAX_WALK_DEPTH = 64


def _keys(value: Any, depth: int = 0) -> Iterator[str]:
    if depth > MAX_WALK_DEPTH:
        return
    if isinstance(value, dict):
        for key, item in value.items():
            yield key
            yield from _keys(item, depth + 1)
    elif isinstance(value, list):
        for item in value:
            yield from _keys(item, depth + 1)


def _texts(value: Any, depth: int = 0) -> Iterator[str]:
    """Every piece of text in a message content, whatever the family's shape."""
    if depth > MAX_WALK_DEPTH:
        return
    if isinstance(value, str):
        yield value
    elif isinstance(value, list):
        for item in value:
            yield from _texts(item, depth + 1)
    elif isinstance(value, dict):
        if isinstance(value.get("text"), str):
            yield value["text"]
        for key in ("content", "parts"):
            if key in value:
                yield from _texts(value[key], depth + 1)


def _text(value: Any) -> str:
    return "\n".join(text for text in _texts(value) if text)


def _messages(body: Mapping[str, Any]) -> list[Any]:
    for key in ("messages", "contents"):
        if isinstance(body.get(key), list):
            return list(body[key])
    return list(body["input"]) if isinstance(body.get("input"), list) else []


def _number(value: Any) -> Decimal:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return Decimal(0)
    try:
        return Decimal(str(value))
    except ArithmeticError:
        return Decimal(0)


def _system(body: Mapping[str, Any], messages: list[Any]) -> str:
    if "system" in body:
        return _text(body["system"])
    instruction = body.get("systemInstruction") or body.get("instructions")
    if instruction:
        return _text(instruction)
    for message in messages:
        if isinstance(message, dict) and message.get("role") in ("system", "developer"):
            return _text(message.get("content"))
    return ""


def request_variables(body: Mapping[str, Any], raw_size: int) -> dict[str, Any]:
    """``request.*`` for one request body (``raw_size``: its length in bytes)."""
    messages = _messages(body)
    generation = body.get("generationConfig")
    max_output = next((body[k] for k in ("max_tokens", "max_completion_tokens",
                                         "max_output_tokens") if k in body), None)
    if max_output is None and isinstance(generation, dict):
        max_output = generation.get("maxOutputTokens")
    # an ``input`` array is the message list (responses family): counted once, as messages
    sources = [body.get("prompt"), body.get("system")]
    if not isinstance(body.get("input"), list):
        sources.insert(0, body.get("input"))
    pieces = [_text(source) for source in sources]
    pieces.extend(_text(message) for message in messages)
    last_user = ""
    for message in reversed(messages):
        if isinstance(message, dict) and message.get("role") == "user":
            last_user = _text(message)
            break
    tools = body.get("tools") if isinstance(body.get("tools"), list) else body.get("functions")
    keys = set(_keys(body))
    input_tokens = Decimal(tokens_for_bytes(raw_size))
    max_output_tokens = _number(max_output)
    return {
        "request.input_tokens": input_tokens,
        "request.max_output_tokens": max_output_tokens,
        "request.total_estimated_tokens": input_tokens + max_output_tokens,
        "request.message_count": Decimal(len(messages)),
        "request.text": "\n".join(piece for piece in pieces if piece),
        "request.last_user_message": last_user,
        "request.system": _system(body, messages),
        "request.has_image": bool(keys & IMAGE_KEYS),
        "request.has_audio": bool(keys & AUDIO_KEYS),
        "request.has_tools": bool(keys & TOOL_KEYS),
        "request.tool_count": Decimal(len(tools) if isinstance(tools, list) else 0),
        "request.stream": body.get("stream") is True,
        "request.temperature": _number(body.get("temperature")),
        "channel.name": "",
    }
