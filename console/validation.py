"""Typed reads of request input -- JSON fields, path and query ids, pages -- each failure a 400
that names the field.

Routes whitelist what they read (contract §7.6: no mass assignment): a field is only ever taken
through one of these getters.  ``MISSING`` distinguishes "absent" from an explicit null/false/0
(contract §7.22: explicit false/0 are honoured on create).

This is the one input layer for numbers (issue 15, finding 4): integers are ASCII digits only
(``str.isdigit`` also passes ``"²"``, and ``int`` then fails), ids fit a signed 64-bit column,
pages are bounded so an offset fits too, and money goes through ``parse_decimal`` whose bound
keeps nano-units inside a BIGINT.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from decimal import Decimal
from typing import Any, Final

from console.http import bad_request
from console.path_ids import MAX_ID
from gateway.billing.money import AmountError, parse_decimal

#: the smallest integer a signed 64-bit column holds
MIN_INT = -MAX_ID - 1
#: the largest page number a list accepts (page x page size stays far inside 64 bits)
MAX_PAGE = 1_000_000
_INTEGER = re.compile(r"-?[0-9]{1,19}")


def integer_text(text: str) -> int | None:
    """``text`` as an integer when it is one written in ASCII digits that fits 64 bits."""
    text = text.strip()
    if not _INTEGER.fullmatch(text):
        return None
    number = int(text)
    return number if MIN_INT <= number <= MAX_ID else None


def id_value(text: str | None, field: str, message: str | None = None) -> int:
    """A positive database id (at most ``MAX_ID``) from a path or query string; otherwise a
    400 naming ``field`` (with ``message``, or "Invalid <field>")."""
    number = integer_text(text) if text is not None else None
    if number is None or number <= 0:
        raise bad_request(message or f"Invalid {field}", field=field)
    return number


def optional_id(text: str | None, field: str) -> int | None:
    """``id_value`` for an optional query parameter (None when absent or blank)."""
    if text is None or not text.strip():
        return None
    return id_value(text, field)


def page_value(text: str | None, default: int, field: str, maximum: int = MAX_PAGE) -> int:
    """A page or page size from the query string.

    Absent, non-numeric or non-positive values mean ``default`` (what lists always did); a
    number past ``maximum`` is a 400 naming ``field`` rather than an offset the database
    cannot hold."""
    if text is None:
        return default
    stripped = text.strip()
    if stripped.isascii() and stripped.isdigit() and len(stripped) > 19:
        raise bad_request(f"{field} must be at most {maximum}", field=field)
    number = integer_text(stripped)
    if number is None or number <= 0:
        return default
    if number > maximum:
        raise bad_request(f"{field} must be at most {maximum}", field=field)
    return number


class _Missing:
    def __repr__(self) -> str:
        return "MISSING"

    def __bool__(self) -> bool:
        return False


MISSING: Final = _Missing()


class Body:
    """A parsed JSON object with validating accessors."""

    def __init__(self, data: dict[str, Any]) -> None:
        self.data = data

    def has(self, name: str) -> bool:
        return name in self.data

    def first_present(self, *names: str) -> str | None:
        """The first of ``names`` present in the body (for accepted aliases)."""
        for name in names:
            if name in self.data:
                return name
        return None

    def _raw(self, name: str, required: bool) -> Any:
        if name not in self.data or self.data[name] is None:
            if required:
                raise bad_request(f"{name} is required", field=name)
            return MISSING
        return self.data[name]

    def string(self, name: str, *, required: bool = False, max_length: int | None = None,
               min_length: int = 0, strip: bool = True, allow_blank: bool = True) -> Any:
        value = self._raw(name, required)
        if value is MISSING:
            return MISSING
        if not isinstance(value, str):
            raise bad_request(f"{name} must be a string", field=name)
        if strip:
            value = value.strip()
        if (required or not allow_blank) and not value:
            raise bad_request(f"{name} is required", field=name)
        if value and len(value) < min_length:
            raise bad_request(f"{name} must be at least {min_length} characters", field=name)
        if max_length is not None and len(value) > max_length:
            raise bad_request(f"{name} must be at most {max_length} characters", field=name)
        return value

    def boolean(self, name: str, *, required: bool = False) -> Any:
        value = self._raw(name, required)
        if value is MISSING:
            return MISSING
        if not isinstance(value, bool):
            raise bad_request(f"{name} must be a boolean", field=name)
        return value

    def integer(self, name: str, *, required: bool = False, minimum: int | None = None,
                maximum: int | None = None) -> Any:
        value = self._raw(name, required)
        if value is MISSING:
            return MISSING
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if isinstance(value, str):
            parsed = integer_text(value)
            value = value if parsed is None else parsed
        if isinstance(value, bool) or not isinstance(value, int):
            raise bad_request(f"{name} must be an integer", field=name)
        minimum = MIN_INT if minimum is None else minimum
        maximum = MAX_ID if maximum is None else maximum
        if value < minimum:
            raise bad_request(f"{name} must be at least {minimum}", field=name)
        if value > maximum:
            raise bad_request(f"{name} must be at most {maximum}", field=name)
        return value

    def decimal(self, name: str, *, required: bool = False, allow_negative: bool = False,
                positive: bool = False) -> Any:
        value = self._raw(name, required)
        if value is MISSING:
            return MISSING
        try:
            result = parse_decimal(value, allow_negative=allow_negative)
        except AmountError as exc:
            raise bad_request(f"{name} {exc}", field=name) from None
        if positive and result <= 0:
            raise bad_request(f"{name} must be greater than 0", field=name)
        return result

    def choice(self, name: str, choices: Iterable[str], *, required: bool = False) -> Any:
        value = self.string(name, required=required)
        if value is MISSING:
            return MISSING
        allowed = list(choices)
        if value not in allowed:
            raise bad_request(f"{name} must be one of: {', '.join(allowed)}", field=name)
        return value

    def int_list(self, name: str, *, required: bool = False, max_items: int | None = None) -> Any:
        value = self._raw(name, required)
        if value is MISSING:
            return MISSING
        if not isinstance(value, list) or any(
            isinstance(item, bool) or not isinstance(item, int) or not 0 < item <= MAX_ID
            for item in value
        ):
            raise bad_request(f"{name} must be an array of positive integer ids", field=name)
        if max_items is not None and len(value) > max_items:
            raise bad_request(f"{name} must have at most {max_items} items", field=name)
        return value

    def string_list(self, name: str, *, required: bool = False, split: bool = False,
                    max_items: int = 1000) -> Any:
        """An array of strings; with ``split`` also a string split on commas/whitespace."""
        value = self._raw(name, required)
        if value is MISSING:
            return MISSING
        if split and isinstance(value, str):
            value = value.replace(",", " ").split()
        if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
            raise bad_request(f"{name} must be an array of strings", field=name)
        items = [item.strip() for item in value if item.strip()]
        if len(items) > max_items:
            raise bad_request(f"{name} must have at most {max_items} items", field=name)
        return items

    def obj(self, name: str, *, required: bool = False) -> Any:
        value = self._raw(name, required)
        if value is MISSING:
            return MISSING
        if not isinstance(value, dict):
            raise bad_request(f"{name} must be an object", field=name)
        return value


def decimal_or_missing(value: Any) -> Decimal | None:
    return None if value is MISSING else value
