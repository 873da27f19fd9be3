"""JSON-text fields ([P-30]): a JSON string is parsed as JSON text, any other JSON value is
serialized; either way the canonical text is stored and returned as a string.

The origin stores the raw text the client sent; canonical text (compact, key order kept) makes
equal values compare equal, so a parameters hash or a charter diff never depends on spacing.
"""

from __future__ import annotations

from typing import Any

import orjson


class JsonTextError(ValueError):
    """The value is a string that does not hold valid JSON."""


def canonical(value: Any) -> str:
    """The canonical JSON text of ``value`` ([P-30])."""
    if isinstance(value, str):
        try:
            parsed = orjson.loads(value)
        except orjson.JSONDecodeError as exc:
            raise JsonTextError(str(exc)) from None
    else:
        parsed = value
    try:
        return orjson.dumps(parsed).decode("utf-8")
    except TypeError as exc:
        raise JsonTextError(str(exc)) from None


def field(body: dict[str, Any], name: str, default: str) -> str:
    """The canonical text of ``body[name]``, ``default`` when the field is absent or null."""
    value = body.get(name)
    if value is None:
        return default
    return canonical(value)
