"""``reserve_for`` over a fixed set of priced candidates, as integer arithmetic.

A meta model reserves the worst case over every candidate its program can reach, on every
request (``meta_reserve``).  The candidates and their prices are fixed for one catalog snapshot
and caller; only the token counts change.  With flat per-token prices the reservation of one
candidate is ``ceil((input x in_price + output x out_price) / 1M x multipliers)`` nano-units,
so each price times its multipliers is turned once into an exact integer ratio and a request
costs two multiplications and one integer division per candidate -- the same number
``reserve_amount_nanos`` computes in ``Decimal``, bit for bit.

Exactness: ``reserve_amount`` computes in an 80-digit context and ``to_nanos`` divides in the
default 28-digit one.  Both are exact while every factor has at most ``MAX_DIGITS`` significant
digits, the token counts stay under ``MAX_TOKENS`` and the amount under ``MAX_NANOS``; outside
those bounds (and for tiered or per-call prices) the candidate is priced by
``reserve_amount_nanos`` itself, so the result is always the one it would give.
"""

from __future__ import annotations

from collections.abc import Sequence
from decimal import Decimal
from fractions import Fraction

from gateway.billing.cost import QUOTA_TOKENS
from gateway.billing.estimate_reserve import reserve_amount_nanos
from gateway.metering import Priced

#: bounds within which the Decimal computation is exact (see the module docstring)
MAX_DIGITS = 20
MAX_TOKENS = 10**15
MAX_NANOS = 10**18
#: nano-units per unit, over the per-1M price unit
_NANOS_PER_PRICE_UNIT = 1000


def _exact(value: Decimal) -> bool:
    return value.is_finite() and len(value.as_tuple().digits) <= MAX_DIGITS


def _linear(priced: Priced) -> tuple[int, int, int] | None:
    """(a, b, d) with ``nanos = ceil((input x a + output x b) / d)`` for flat prices whose
    Decimal computation is exact; None otherwise."""
    prices, effective = priced.prices, priced.effective
    if prices.tiers or prices.quota_type != QUOTA_TOKENS:
        return None
    factors = (prices.input, prices.output, effective.group_multiplier,
               effective.user_channel_multiplier)
    if not all(_exact(factor) for factor in factors):
        return None
    scale = (Fraction(effective.group_multiplier) * Fraction(effective.user_channel_multiplier)
             * _NANOS_PER_PRICE_UNIT)
    a, b = Fraction(prices.input) * scale, Fraction(prices.output) * scale
    d = a.denominator * b.denominator
    return a.numerator * (d // a.denominator), b.numerator * (d // b.denominator), d


class ReserveRule:
    """``reserve_for(options, ...)`` for one fixed tuple of options (at least one)."""

    __slots__ = ("_linear", "_others")

    def __init__(self, options: Sequence[Priced]) -> None:
        linear: list[tuple[int, int, int, Priced]] = []
        others: list[Priced] = []
        for option in options:
            form = _linear(option)
            if form is None:
                others.append(option)
            else:
                linear.append((*form, option))
        self._linear = tuple(linear)
        self._others = tuple(others)

    def nanos(self, input_tokens: int, max_output: int | None, default_output: int) -> int:
        """What ``reserve_for`` over the options gives for these token counts."""
        output = max_output if max_output and max_output > 0 else default_output
        tokens_in, tokens_out = max(0, input_tokens), max(0, output)
        best: int | None = None
        exact = tokens_in < MAX_TOKENS and tokens_out < MAX_TOKENS
        for a, b, d, option in self._linear:
            amount = -((-(tokens_in * a + tokens_out * b)) // d) if exact else MAX_NANOS
            if amount >= MAX_NANOS or amount <= -MAX_NANOS:
                amount = _decimal(option, input_tokens, max_output, default_output)
            if best is None or amount > best:
                best = amount
        for option in self._others:
            amount = _decimal(option, input_tokens, max_output, default_output)
            if best is None or amount > best:
                best = amount
        if best is None:
            raise ValueError("a reserve rule needs at least one option")
        return best


def _decimal(option: Priced, input_tokens: int, max_output: int | None,
             default_output: int) -> int:
    return reserve_amount_nanos(
        option.prices, input_tokens, max_output, default_output_reserve=default_output,
        group_multiplier=option.effective.group_multiplier,
        user_channel_multiplier=option.effective.user_channel_multiplier)
