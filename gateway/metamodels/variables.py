"""The variables a meta-model condition may read, their kinds, and how a request fills them.

The table is contract §6.3's.  ``judge.answer`` exists only inside a ``judge``'s route.
Request variables come from the raw JSON body of any text family (chat, completions,
responses, messages, Google ``contents``), so one program routes every family alike.
``RequestVariables`` computes each one the first time a condition reads it: a route stops at
its first true branch, so the variables of the branches after it are never computed.
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
    if isinstance(value, str):  # the common shapes answered without the walk
        return value
    if (isinstance(value, dict) and "parts" not in value
            and not isinstance(value.get("text"), str)):
        content = value.get("content")
        if isinstance(content, str):
            return content
    found: list[str] = []
    _collect_texts(value, found)
    return "\n".join(text for text in found if text)


def _messages(body: Mapping[str, Any]) -> list[Any]:
    for key in ("messages", "contents"):
        if isinstance(body.get(key), list):
            return list(body[key])
    return list(body["input"]) if isinstance(body.get("input"), list) else []


#: ``Decimal(str(x))`` of the floats requests send most (temperatures, top_p): a few values
_FLOATS: dict[float, Decimal] = {}
_FLOATS_MAX = 1024


def _number(value: Any) -> Decimal:
    if value.__class__ is float:
        found = _FLOATS.get(value)
        if found is not None:
            return found
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return Decimal(0)
    if isinstance(value, int):
        return Decimal(value)  # the value ``Decimal(str(value))`` has, without the string
    if value.__class__ is float and value == value and value and len(_FLOATS) < _FLOATS_MAX:
        # (not 0.0: -0.0 is equal to it, but a different ``Decimal``)
        try:
            found = _FLOATS[value] = Decimal(str(value))
        except ArithmeticError:
            return Decimal(0)
        return found
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


def _shared_start(first: str, second: str) -> str:
    length = 0
    while length < min(len(first), len(second)) and first[length] == second[length]:
        length += 1
    return first[:length]


def _quoted(names: frozenset[str]) -> tuple[bytes, ...]:
    """What a raw body holds when one of ``names`` is a key in it (``"name"``), as the fewest
    quoted prefixes (``"image`` covers ``"image"``, ``"image_url"`` and ``"images"``): a
    substring search each, the fastest scan of a few hundred bytes."""
    prefixes: list[str] = []
    for name in sorted(names):  # neighbours sharing 4 or more leading characters merge
        shared = _shared_start(prefixes[-1], name) if prefixes else ""
        if len(shared) >= 4:
            prefixes[-1] = shared
        else:
            prefixes.append(name)
    return tuple(f'"{prefix}'.encode() for prefix in prefixes)


_QUOTED = {names: _quoted(names) for names in (IMAGE_KEYS, AUDIO_KEYS, TOOL_KEYS)}


class RequestVariables(dict[str, Any]):
    """``request.*`` for one request body, each computed the first time it is read
    (``variables[name]``; a name no request fills raises ``KeyError``, as a missing key) and
    kept, as are the pieces several share (the message list, the body's keys).  Values may
    also be set directly (the caller's variables, ``judge.answer``)."""

    __slots__ = ("_escaped", "_keys", "_messages", "body", "raw", "raw_size")

    #: how each variable is computed from the mapping (subclasses add theirs)
    PRODUCERS: dict[str, Callable[[Any], Any]] = {}

    def __init__(self, body: Mapping[str, Any], raw_size: int, raw: bytes | None = None
                 ) -> None:
        # (starts empty: ``dict.__new__`` made it so, ``dict.__init__`` has nothing to add)
        self.body = body
        self.raw_size = raw_size
        #: the body as received: lets most bodies answer ``has_*`` without a walk
        self.raw = raw
        self._messages: list[Any] | None = None
        self._keys: set[str] | None = None
        self._escaped: bool | None = None

    def __missing__(self, name: str) -> Any:
        produce = self.PRODUCERS.get(name)
        if produce is None:
            raise KeyError(name)
        value = self[name] = produce(self)
        return value

    @property
    def messages(self) -> list[Any]:
        if self._messages is None:
            self._messages = _messages(self.body)
        return self._messages

    @property
    def keys_found(self) -> set[str]:
        """Every key of every object in the body (one walk, only when a raw scan cannot
        answer)."""
        if self._keys is None:
            self._keys = set()
            _collect_keys(self.body, self._keys)
        return self._keys

    def input_tokens(self) -> Decimal:
        return Decimal(tokens_for_bytes(self.raw_size))

    def max_output_tokens(self) -> Decimal:
        body = self.body
        max_output = None
        for key in ("max_tokens", "max_completion_tokens", "max_output_tokens"):
            if key in body:
                max_output = body[key]
                break
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

    def system(self) -> str:
        return _system(self.body, self.messages)

    def tool_count(self) -> Decimal:
        body = self.body
        tools = body.get("tools") if isinstance(body.get("tools"), list) else body.get(
            "functions")
        return Decimal(len(tools) if isinstance(tools, list) else 0)

    def total_estimated_tokens(self) -> Decimal:
        return Decimal(tokens_for_bytes(self.raw_size)) + self.max_output_tokens()

    def message_count(self) -> Decimal:
        return Decimal(len(self.messages))

    def stream(self) -> bool:
        return self.body.get("stream") is True

    def temperature(self) -> Decimal:
        return _number(self.body.get("temperature"))

    def channel_name(self) -> str:
        return ""


def _has_key(names: frozenset[str]) -> Callable[[RequestVariables], bool]:
    """The producer of "is any of ``names`` a key anywhere in the body".  A key is in the raw
    text as ``"name"`` unless it was written with ``\\u`` escapes, so a body without either
    answers without being walked."""
    quoted = _QUOTED[names]

    def has(variables: RequestVariables) -> bool:
        raw = variables.raw
        if raw is not None:
            escaped = variables._escaped
            if escaped is None:  # a backslash is rare: look for the escape only then
                escaped = variables._escaped = b"\\" in raw and b"\\u" in raw
            if not escaped:
                for prefix in quoted:
                    if prefix in raw:
                        break
                else:
                    return False
        return not variables.keys_found.isdisjoint(names)
    return has


_REQUEST: dict[str, Callable[[RequestVariables], Any]] = {
    "request.input_tokens": RequestVariables.input_tokens,
    "request.max_output_tokens": RequestVariables.max_output_tokens,
    "request.total_estimated_tokens": RequestVariables.total_estimated_tokens,
    "request.message_count": RequestVariables.message_count,
    "request.text": RequestVariables.text,
    "request.last_user_message": RequestVariables.last_user_message,
    "request.system": RequestVariables.system,
    "request.has_image": _has_key(IMAGE_KEYS),
    "request.has_audio": _has_key(AUDIO_KEYS),
    "request.has_tools": _has_key(TOOL_KEYS),
    "request.tool_count": RequestVariables.tool_count,
    "request.stream": RequestVariables.stream,
    "request.temperature": RequestVariables.temperature,
    "channel.name": RequestVariables.channel_name,
}
RequestVariables.PRODUCERS = _REQUEST


def request_variables(body: Mapping[str, Any], raw_size: int,
                      wanted: Iterable[str] | None = None,
                      raw: bytes | None = None) -> dict[str, Any]:
    """``request.*`` for one request body (``raw_size``: its length in bytes); only the names
    in ``wanted`` when given (a program reads a few, and walking a body costs).  ``raw``, the
    body as received, lets most bodies skip the walk for ``has_*``."""
    source = RequestVariables(body, raw_size, raw)
    names = _REQUEST if wanted is None else [name for name in wanted if name in _REQUEST]
    return {name: source[name] for name in names}
