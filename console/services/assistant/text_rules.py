"""Small input rules the assistant bodies share: rune-counted strings and id lists.

Each failure is the caller's contract message (a 400); nothing here reads the database.
"""

from __future__ import annotations

from typing import Any

from console.http import bad_request

MAX_REFERENCED_SERVERS = 20


def text(body: dict[str, Any], names: tuple[str, ...], limit: int, message: str,
         *, strip: bool = True) -> str:
    """The first present of ``names`` as a string of at most ``limit`` characters (Python
    strings count code points, i.e. runes); absent or null is ``""``."""
    for name in names:
        if name in body and body[name] is not None:
            value = body[name]
            if not isinstance(value, str):
                raise bad_request(f"{name} must be a string", field=name)
            value = value.strip() if strip else value
            if len(value) > limit:
                raise bad_request(message, field=name)
            return value
    return ""


def flag(body: dict[str, Any], name: str, default: bool) -> bool:
    value = body.get(name)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise bad_request(f"{name} must be a boolean", field=name)
    return value


def id_list(body: dict[str, Any], names: tuple[str, ...]) -> list[str]:
    """Ids from the first present of ``names``: strings (numbers become their decimal text;
    objects are reduced to their ``id``), trimmed, empties dropped, deduped in order."""
    for name in names:
        if name in body and body[name] is not None:
            value = body[name]
            if not isinstance(value, list):
                raise bad_request(f"{name} must be an array", field=name)
            ids: list[str] = []
            for item in value:
                if isinstance(item, dict):
                    item = item.get("id")
                if isinstance(item, int) and not isinstance(item, bool):
                    item = str(item)
                if not isinstance(item, str):
                    raise bad_request(f"{name} must be an array of ids", field=name)
                item = item.strip()
                if item and item not in ids:
                    ids.append(item)
            return ids
    return []


def server_ids(body: dict[str, Any], names: tuple[str, ...]) -> list[str]:
    ids = id_list(body, names)
    if len(ids) > MAX_REFERENCED_SERVERS:
        raise bad_request("Too many MCP servers", field=names[0])
    return ids


def whole_number(body: dict[str, Any], names: tuple[str, ...], default: int = 0, *,
                 clamp: tuple[int, int] | None = None) -> int:
    """An integer (a JSON number or numeric string) from the first present of ``names``;
    with ``clamp`` any integer is brought into that range instead of refused."""
    for name in names:
        value = body.get(name)
        if value is None:
            continue
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if isinstance(value, str) and value.strip().lstrip("-").isdigit() and \
                value.strip().isascii() and len(value.strip()) < 40:
            value = int(value.strip())
        if isinstance(value, int) and not isinstance(value, bool) and clamp is not None:
            return min(clamp[1], max(clamp[0], value))
        if isinstance(value, bool) or not isinstance(value, int) or abs(value) >= 2**31:
            raise bad_request(f"{name} must be an integer", field=name)
        return value
    return default
