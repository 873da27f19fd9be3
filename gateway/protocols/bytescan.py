"""Byte-level reads of compact JSON events, for the same-format streaming hot path.

Passthrough streams must not pay a JSON round trip per chunk.  Two facts make byte searches
safe: inside a JSON string every ``"`` is escaped, so ``"key":`` can only match a real key;
and a string value ends at the first ``"`` preceded by an even number of backslashes.  All
searches use ``bytes.find`` (C speed); the functions are written flat because on this path
Python call overhead costs as much as the searches themselves.
"""

from __future__ import annotations

_QUOTE = 34
_BACKSLASH = 92
_SPACE = 32


def _value_span(data: bytes, key: bytes, found: int) -> tuple[int, int]:
    """(start, end) of the string value after ``key`` found at ``found``: ``data[start:end]``
    is the escaped text; (-1, resume position) when the value is not a string."""
    start = found + len(key)
    size = len(data)
    while start < size and data[start] == _SPACE:
        start += 1
    if start >= size or data[start] != _QUOTE:
        return -1, start
    start += 1
    end = data.find(b'"', start)
    while end != -1 and data[end - 1] == _BACKSLASH:
        back = end - 2
        while data[back] == _BACKSLASH:
            back -= 1
        if (end - 1 - back) % 2 == 0:
            break
        end = data.find(b'"', end + 1)
    return start, end


def string_value_field(data: bytes, key: bytes) -> bytes | None:
    """The exact bytes ``"key":"value"`` (as written, spacing included) of the first string
    value of ``key``, or None."""
    found = data.find(key)
    if found == -1:
        return None
    start, end = _value_span(data, key, found)
    if start == -1 or end == -1:
        return None
    return data[found:end + 1]


def replace_string_value(data: bytes, key: bytes, value: bytes) -> bytes:
    """``data`` with the first string value of ``key`` replaced by the JSON string ``value``
    (already quoted and escaped); unchanged when the key has no string value."""
    found = data.find(key)
    if found == -1:
        return data
    start, end = _value_span(data, key, found)
    if start == -1 or end == -1:
        return data
    return data[:start - 1] + value + data[end + 1:]
