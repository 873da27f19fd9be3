"""Byte-level reads of compact JSON events, for the same-format streaming hot path.

Passthrough streams must not pay a JSON round trip per chunk.  Two facts make byte searches
safe: inside a JSON string every ``"`` is escaped, so ``"key":`` can only match a real key;
and a string value ends at the first ``"`` preceded by an even number of backslashes.  All
searches use ``bytes.find`` (C speed); nothing here loops per byte except over backslash runs.
"""

from __future__ import annotations

_QUOTE = 34
_BACKSLASH = 92
_SPACE = 32


def _string_end(data: bytes, start: int) -> int:
    """Index of the closing quote of the string whose first character is at ``start``."""
    position = start
    while True:
        position = data.find(b'"', position)
        if position == -1:
            return -1
        back = position - 1
        while data[back] == _BACKSLASH:
            back -= 1
        if (position - 1 - back) % 2 == 0:
            return position
        position += 1


def _value_start(data: bytes, after_key: int) -> int:
    """Index just past the opening quote of the value after ``"key":``, or -1."""
    position = after_key
    while position < len(data) and data[position] == _SPACE:
        position += 1
    if position < len(data) and data[position] == _QUOTE:
        return position + 1
    return -1


def string_values_size(data: bytes, key: bytes) -> int:
    """Total escaped length of every string value of ``key`` (given as ``b'"name":'``)."""
    total = 0
    found = data.find(key)
    while found != -1:
        start = _value_start(data, found + len(key))
        if start == -1:
            found = data.find(key, found + len(key))
            continue
        end = _string_end(data, start)
        if end == -1:
            return total
        total += end - start
        found = data.find(key, end + 1)
    return total


def replace_string_value(data: bytes, key: bytes, value: bytes) -> bytes:
    """``data`` with the first string value of ``key`` replaced by the JSON string ``value``
    (already quoted and escaped); unchanged when the key has no string value."""
    found = data.find(key)
    if found == -1:
        return data
    start = _value_start(data, found + len(key))
    if start == -1:
        return data
    end = _string_end(data, start)
    if end == -1:
        return data
    if data[start - 1:end + 1] == value:
        return data
    return data[:start - 1] + value + data[end + 1:]
