"""Small builders for the JSON Schema (2020-12, as OpenAPI 3.1 uses it) of the shapes."""

from __future__ import annotations

from typing import Any

OPEN_OBJECT: dict[str, Any] = {"type": "object", "additionalProperties": True}
ANY: dict[str, Any] = {}
STRING: dict[str, Any] = {"type": "string"}
BOOLEAN: dict[str, Any] = {"type": "boolean"}
INTEGER: dict[str, Any] = {"type": "integer"}
ARRAY: dict[str, Any] = {"type": "array"}
#: money on the wire: a decimal string (gateway contract conventions)
AMOUNT: dict[str, Any] = {"type": "string", "pattern": r"^-?[0-9]+(\.[0-9]+)?$"}
#: money in a request: a decimal string or a number (DESIGN.md, Money)
AMOUNT_IN: dict[str, Any] = {"type": ["string", "number"]}
BINARY_FILE: dict[str, Any] = {"type": "string", "contentMediaType": "application/octet-stream"}


def obj(mandatory: tuple[str, ...] = (), /, **properties: dict[str, Any]) -> dict[str, Any]:
    """An object with these properties (others allowed); ``mandatory`` names are required."""
    shape: dict[str, Any] = {"type": "object", "properties": properties,
                             "additionalProperties": True}
    if mandatory:
        shape["required"] = list(mandatory)
    return shape


def array_of(items: dict[str, Any]) -> dict[str, Any]:
    return {"type": "array", "items": items}


def json_type(value: Any) -> dict[str, Any]:
    """The schema of the JSON type of a sample value."""
    if isinstance(value, bool):
        return BOOLEAN
    if isinstance(value, int):
        return INTEGER
    if isinstance(value, str):
        return STRING
    if isinstance(value, list):
        return ARRAY
    if isinstance(value, dict):
        return OPEN_OBJECT
    return ANY
