"""How a setting is described and checked: the ``Spec`` record, text parsing and PUT checks.

The building blocks the area catalogues (``catalog_site``, ``catalog_auth``, ``catalog_ops``,
``catalog_payment``) are written with.  It imports none of them, so ``catalog`` can assemble
the areas at import time without an import circle.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any, Literal

import orjson

from gateway.channels.net_policy import UnsafeUrl, plain_host_url

Kind = Literal["bool", "text", "json"]

TRUE_WORDS = frozenset({"1", "true", "yes", "on", "enabled"})
FALSE_WORDS = frozenset({"0", "false", "no", "off", "disabled"})


class SettingError(ValueError):
    """A PUT value that cannot be accepted; the message is shown to the admin."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(message)
        self.key = key


Check = Callable[[str], str]


@dataclass(frozen=True)
class Spec:
    key: str
    kind: Kind
    #: default as stored text
    default: str = ""
    #: never returned by any GET; a blank PUT value keeps the stored one
    secret: bool = False
    #: never returned by any GET, but a blank PUT value is stored (clears it)
    writeonly: bool = False
    public: bool = False
    #: derived on read; ignored when a PUT body carries it (admin UIs send the GET object back)
    readonly: bool = False
    #: bookkeeping rows written by the server itself: never shown, refused on PUT
    internal: bool = False
    #: normalise a PUT value (already converted to stored text); raise SettingError to refuse
    check: Check | None = None


def parse_bool(text: str | None, default: bool) -> bool:
    if text is None:
        return default
    word = text.strip().lower()
    if word in TRUE_WORDS:
        return True
    if word in FALSE_WORDS:
        return False
    return default


def to_stored_text(spec: Spec, value: Any) -> str:
    """Convert a JSON value from a PUT body into the stored text form of ``spec``."""
    if spec.kind == "bool":
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, int) and value in (0, 1):
            return "true" if value else "false"
        if isinstance(value, str) and value.strip().lower() in TRUE_WORDS | FALSE_WORDS:
            return "true" if value.strip().lower() in TRUE_WORDS else "false"
        raise SettingError(spec.key, f"{spec.key} must be a boolean")
    if spec.kind == "json":
        if isinstance(value, str):
            return value.strip()
        if isinstance(value, (list, dict)):
            return orjson.dumps(value).decode()
        raise SettingError(spec.key, f"{spec.key} must be JSON (an array, object or JSON text)")
    if isinstance(value, bool):
        raise SettingError(spec.key, f"{spec.key} must be a string")
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return format(Decimal(repr(value)), "f")
    if not isinstance(value, str):
        raise SettingError(spec.key, f"{spec.key} must be a string")
    return value.strip()


# --- checks shared by the area modules -------------------------------------------------------

def int_range(key: str, low: int, high: int | None = None, message: str | None = None) -> Check:
    def check(text: str) -> str:
        try:
            number = Decimal(text)
        except InvalidOperation:
            number = Decimal("NaN")
        # adjusted() bounds the size first: int() of "1e999999999" would be a huge number
        if not number.is_finite() or number.adjusted() > 18 \
                or number != number.to_integral_value():
            raise SettingError(key, message or f"{key} must be a whole number")
        whole = int(number)
        if whole < low or (high is not None and whole > high):
            bound = f"between {low} and {high}" if high is not None else f"at least {low}"
            raise SettingError(key, message or f"{key} must be {bound}")
        return str(whole)

    return check


def non_negative_decimal(key: str) -> Check:
    def check(text: str) -> str:
        try:
            number = Decimal(text)
        except InvalidOperation:
            raise SettingError(key, f"{key} must be a number") from None
        if not number.is_finite() or number < 0 or number.adjusted() > 18:
            raise SettingError(key, f"{key} must be a number from 0 to 10^18")
        return format(number, "f")

    return check


def one_of(key: str, values: tuple[str, ...], message: str, empty: str | None = None) -> Check:
    def check(text: str) -> str:
        word = text.strip().lower()
        if not word and empty is not None:
            return empty
        if word not in values:
            raise SettingError(key, message)
        return word

    return check


def normalised_choice(values: dict[str, str], fallback: str) -> Check:
    """Map accepted spellings to their stored form; anything else becomes ``fallback``."""

    def check(text: str) -> str:
        return values.get(text.strip().lower(), fallback)

    return check


def is_http_url(text: str) -> bool:
    lowered = text.lower()
    return (lowered.startswith("http://") or lowered.startswith("https://")) and len(text) > 8


def http_url(key: str) -> Check:
    def check(text: str) -> str:
        if text and not is_http_url(text):
            raise SettingError(key, f"{key} must be an http(s) URL")
        try:
            # odd host spellings (IDNA dots, percent-encoding) are normalised or refused
            return plain_host_url(text) if text else text
        except UnsafeUrl as exc:
            raise SettingError(key, f"{key}: {exc}") from None

    return check


def max_length(key: str, limit: int, message: str | None = None) -> Check:
    def check(text: str) -> str:
        if len(text) > limit:
            raise SettingError(key, message or f"{key} must be at most {limit} characters")
        return text

    return check


def json_shaped(key: str, shape: type, message: str) -> Check:
    """JSON text whose top level is ``shape`` (list or dict); blank is allowed."""

    def check(text: str) -> str:
        if not text:
            return text
        try:
            value = orjson.loads(text)
        except orjson.JSONDecodeError:
            raise SettingError(key, message) from None
        if not isinstance(value, shape):
            raise SettingError(key, message)
        return orjson.dumps(value).decode()

    return check


def string_array(key: str, message: str) -> Check:
    shaped = json_shaped(key, list, message)

    def check(text: str) -> str:
        text = shaped(text)
        if text and not all(isinstance(item, (str, int, float)) and not isinstance(item, bool)
                            for item in orjson.loads(text)):
            raise SettingError(key, message)
        return text

    return check
