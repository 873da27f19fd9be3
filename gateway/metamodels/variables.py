"""The variables a meta-model condition may read, their kinds, and how a request fills them.

The table is contract §6.3's.  ``judge.answer`` exists only inside a ``judge``'s route.
Request variables come from the raw JSON body of any text family (chat, completions,
responses, messages, Google ``contents``), so one program routes every family alike.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
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


def _collect_keys(value: Any, found: set[str], depth: int = 0) -> None:
    """Every key of every object nested in ``value`` into ``found``."""
    if depth > MAX_WALK_DEPTH:
        return
    items = value.values() if isinstance(value, dict) else value
    if isinstance(value, dict):
        found.update(value)
    for item in items:
        if isinstance(item, (dict, list)):
            _collect_keys(item, found, depth + 1)


def _collect_texts(value: Any, found: list[str], depth: int = 0) -> None:
    """Every piece of text in a message content, whatever the family's shape, into
    ``found``."""
    if depth > MAX_WALK_DEPTH:
        return
    if isinstance(value, str):
        found.append(value)
    elif isinstance(value, list):
        for item in value:
            _collect_texts(item, found, depth + 1)
    elif isinstance(value, dict):
        if isinstance(value.get("text"), str):
            found.append(value["text"])
        for key in ("content", "parts"):
            if key in value:
                _collect_texts(value[key], found, depth + 1)


def _text(value: Any) -> str:
    found: list[str] = []
    _collect_texts(value, found)
    return "\n".join(text for text in found if text)


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


def _quoted(names: frozenset[str]) -> tuple[bytes, ...]:
    return tuple(f'"{name}"'.encode() for name in sorted(names))


_QUOTED = {names: _quoted(names) for names in (IMAGE_KEYS, AUDIO_KEYS, TOOL_KEYS)}


class _Body:
    """One request body, each derived value computed at most once and only when asked for."""

    def __init__(self, body: Mapping[str, Any], raw_size: int, raw: bytes | None) -> None:
        self.body = body
        self.raw_size = raw_size
        self.raw = raw
        self._messages: list[Any] | None = None
        self._keys: set[str] | None = None

    @property
    def messages(self) -> list[Any]:
        if self._messages is None:
            self._messages = _messages(self.body)
        return self._messages

    @property
    def keys(self) -> set[str]:
        if self._keys is None:
            self._keys = set()
            _collect_keys(self.body, self._keys)
        return self._keys

    def has_key(self, names: frozenset[str]) -> bool:
        """Whether any of ``names`` is a key anywhere in the body.  A key is in the raw text as
        ``"name"`` unless it was written with ``\\u`` escapes, so a body without either
        answers without being walked."""
        raw = self.raw
        if raw is not None and b"\\u" not in raw and not any(
                quoted in raw for quoted in _QUOTED[names]):
            return False
        return not self.keys.isdisjoint(names)

    def input_tokens(self) -> Decimal:
        return Decimal(tokens_for_bytes(self.raw_size))

    def max_output_tokens(self) -> Decimal:
        body = self.body
        max_output = next((body[k] for k in ("max_tokens", "max_completion_tokens",
                                             "max_output_tokens") if k in body), None)
        generation = body.get("generationConfig")
        if max_output is None and isinstance(generation, dict):
            max_output = generation.get("maxOutputTokens")
        return _number(max_output)

    def text(self) -> str:
        body = self.body
        # an ``input`` array is the message list (responses family): counted once, as messages
        sources = [body.get("prompt"), body.get("system")]
        if not isinstance(body.get("input"), list):
            sources.insert(0, body.get("input"))
        pieces = [_text(source) for source in sources]
        pieces.extend(_text(message) for message in self.messages)
        return "\n".join(piece for piece in pieces if piece)

    def last_user_message(self) -> str:
        for message in reversed(self.messages):
            if isinstance(message, dict) and message.get("role") == "user":
                return _text(message)
        return ""

    def tool_count(self) -> Decimal:
        body = self.body
        tools = body.get("tools") if isinstance(body.get("tools"), list) else body.get(
            "functions")
        return Decimal(len(tools) if isinstance(tools, list) else 0)


_REQUEST: dict[str, Callable[[_Body], Any]] = {
    "request.input_tokens": _Body.input_tokens,
    "request.max_output_tokens": _Body.max_output_tokens,
    "request.total_estimated_tokens": lambda b: b.input_tokens() + b.max_output_tokens(),
    "request.message_count": lambda b: Decimal(len(b.messages)),
    "request.text": _Body.text,
    "request.last_user_message": _Body.last_user_message,
    "request.system": lambda b: _system(b.body, b.messages),
    "request.has_image": lambda b: b.has_key(IMAGE_KEYS),
    "request.has_audio": lambda b: b.has_key(AUDIO_KEYS),
    "request.has_tools": lambda b: b.has_key(TOOL_KEYS),
    "request.tool_count": _Body.tool_count,
    "request.stream": lambda b: b.body.get("stream") is True,
    "request.temperature": lambda b: _number(b.body.get("temperature")),
    "channel.name": lambda b: "",
}


def request_variables(body: Mapping[str, Any], raw_size: int,
                      wanted: Iterable[str] | None = None,
                      raw: bytes | None = None) -> dict[str, Any]:
    """``request.*`` for one request body (``raw_size``: its length in bytes); only the names
    in ``wanted`` when given (a program reads a few, and walking a body costs).  ``raw``, the
    body as received, lets most bodies skip the walk for ``has_*``."""
    source = _Body(body, raw_size, raw)
    names = _REQUEST if wanted is None else [name for name in wanted if name in _REQUEST]
    return {name: _REQUEST[name](source) for name in names}
