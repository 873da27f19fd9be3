"""Exact money: ``Decimal`` in code, integer nano-units (1e-9) in storage, strings on the wire.

Pure: no I/O.  Floats never touch an amount -- a JSON number is parsed from its text form by
orjson into float, so inputs are re-read through ``repr`` which round-trips the shortest decimal
the client wrote.
"""

from __future__ import annotations

from decimal import ROUND_HALF_EVEN, Decimal, InvalidOperation

NANO = Decimal("0.000000001")
NANOS_PER_UNIT = 1_000_000_000
#: largest amount accepted from a client (1e9 units = 1e18 nano-units): a BIGINT holds about
#: 9.2e18, so one such amount -- and a sum of a few -- still fits (1e12, the old bound, did not)
MAX_AMOUNT = Decimal(10) ** 9


class AmountError(ValueError):
    """A value that is not an acceptable decimal amount."""


def parse_decimal(value: object, *, allow_negative: bool = False) -> Decimal:
    """Parse a JSON number or numeric string into a Decimal with at most 9 decimal places."""
    if isinstance(value, bool) or value is None:
        raise AmountError("must be a number or a numeric string")
    if isinstance(value, int):
        result = Decimal(value)
    elif isinstance(value, float):
        result = Decimal(repr(value))
    elif isinstance(value, str):
        text = value.strip()
        if not text:
            raise AmountError("must not be empty")
        try:
            result = Decimal(text)
        except InvalidOperation as exc:
            raise AmountError("must be a number or a numeric string") from exc
    else:
        raise AmountError("must be a number or a numeric string")
    if not result.is_finite():
        raise AmountError("must be a finite number")
    if not allow_negative and result < 0:
        raise AmountError("must not be negative")
    if abs(result) > MAX_AMOUNT:
        raise AmountError("is too large")
    if result != result.quantize(NANO, rounding=ROUND_HALF_EVEN):
        raise AmountError("has more than 9 decimal places")
    return result


def to_nanos(amount: Decimal) -> int:
    """Decimal units -> integer nano-units (rounded half-even at the 9th place)."""
    return int((amount / NANO).to_integral_value(rounding=ROUND_HALF_EVEN))


def from_nanos(nanos: int) -> Decimal:
    return (Decimal(nanos) * NANO).normalize() if nanos else Decimal(0)


def format_decimal(amount: Decimal) -> str:
    """Wire form: plain notation, trailing zeros trimmed (``"10"``, ``"7.2"``, ``"0.000125"``)."""
    if amount == 0:
        return "0"
    text = format(amount.normalize(), "f")
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return text


def format_nanos(nanos: int) -> str:
    return format_decimal(from_nanos(nanos))
