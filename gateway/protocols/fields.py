"""Type checks for the few request fields the gateway itself reads (contract §8.1).

Each check raises a 400 ``ProtocolError`` naming the field, so every format module refuses bad
input the same way.  Fields the gateway does not read are never checked here: on same-format
calls they travel untouched and the upstream judges them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from gateway.protocols.errors import ProtocolError, invalid


def parse_object(body: bytes) -> dict[str, Any]:
    """The request body as a JSON object, else 400 ``Invalid request body``."""
    try:
        parsed = orjson.loads(body)
    except orjson.JSONDecodeError:
        raise ProtocolError(400, "Invalid request body") from None
    if not isinstance(parsed, dict):
        raise ProtocolError(400, "Invalid request body")
    return parsed


def model_name(body: Mapping[str, Any]) -> str:
    model = body.get("model")
    if not isinstance(model, str) or not model.strip():
        raise ProtocolError(400, "Model not specified", param="model")
    return model.strip()


def flag(body: Mapping[str, Any], name: str) -> bool:
    """An optional boolean (null = absent = false)."""
    value = body.get(name)
    if value is None:
        return False
    if not isinstance(value, bool):
        raise invalid(f"{name} must be a boolean", name)
    return value


def count(body: Mapping[str, Any], name: str, *, minimum: int = 0) -> int | None:
    """An optional non-negative (or >= ``minimum``) integer."""
    value = body.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise invalid(f"{name} must be an integer", name)
    if value < minimum:
        raise invalid(f"{name} must be at least {minimum}", name)
    return value


def number(body: Mapping[str, Any], name: str) -> float | None:
    value = body.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise invalid(f"{name} must be a number", name)
    return float(value)


def optional_object(body: Mapping[str, Any], name: str) -> dict[str, Any]:
    value = body.get(name)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise invalid(f"{name} must be an object", name)
    return value


def optional_list(body: Mapping[str, Any], name: str) -> list[Any]:
    value = body.get(name)
    if value is None:
        return []
    if not isinstance(value, list):
        raise invalid(f"{name} must be an array", name)
    return value


def json_text(value: Any) -> str:
    """Compact JSON text (for estimating tool definitions and the like)."""
    return orjson.dumps(value).decode()
