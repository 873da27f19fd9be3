"""A flat-priced reservation as exact integer arithmetic, for the request path.

Every metered request reserves its worst case before it is sent (``reserve_amount_nanos``).
With flat per-token prices that amount is ``ceil((input x in_price + output x out_price) / 1M
x multipliers)`` nano-units, so the prices and multipliers of one priced candidate can be turned
once into an exact integer ratio ``(a, b, d)`` and a request costs two multiplications and one
integer division instead of ~10 µs of ``Decimal`` contexts -- the same number, bit for bit.

Exactness: ``reserve_amount`` computes in an 80-digit context and ``to_nanos`` divides in the
default 28-digit one.  Both are exact while every factor has at most ``MAX_DIGITS`` significant
digits, the token counts stay under ``MAX_TOKENS`` and the amount under ``MAX_NANOS``.  Outside
those bounds (and for tiered or per-call prices) there is no linear form, or ``linear_nanos``
answers None, and the caller prices with ``reserve_amount_nanos`` itself.
"""

from __future__ import annotations

from decimal import Decimal
from fractions import Fraction

from gateway.billing.cost import QUOTA_TOKENS, PriceSet

#: bounds within which the Decimal computation is exact (see the module docstring)
MAX_DIGITS = 20
MAX_TOKENS = 10**15
MAX_NANOS = 10**18
#: nano-units per unit, over the per-1M price unit
_NANOS_PER_PRICE_UNIT = 1000

#: ``(a, b, d)``: ``nanos = ceil((input x a + output x b) / d)``
LinearForm = tuple[int, int, int]


def _exact(value: Decimal) -> bool:
    return value.is_finite() and len(value.as_tuple().digits) <= MAX_DIGITS


def linear_form(prices: PriceSet, group_multiplier: Decimal,
                user_channel_multiplier: Decimal) -> LinearForm | None:
    """The integer form of these flat prices and multipliers; None when the prices are tiered
    or per call, or a factor is too long for the Decimal computation to be exact."""
    if prices.tiers or prices.quota_type != QUOTA_TOKENS:
        return None
    factors = (prices.input, prices.output, group_multiplier, user_channel_multiplier)
    if not all(_exact(factor) for factor in factors):
        return None
    scale = Fraction(group_multiplier) * Fraction(user_channel_multiplier) * _NANOS_PER_PRICE_UNIT
    a, b = Fraction(prices.input) * scale, Fraction(prices.output) * scale
    d = a.denominator * b.denominator
    return a.numerator * (d // a.denominator), b.numerator * (d // b.denominator), d


def linear_nanos(form: LinearForm, input_tokens: int, output_tokens: int) -> int | None:
    """``reserve_amount_nanos`` of ``input_tokens`` and (already defaulted) ``output_tokens``;
    None outside the bounds where the two agree exactly."""
    tokens_in, tokens_out = max(0, input_tokens), max(0, output_tokens)
    if tokens_in >= MAX_TOKENS or tokens_out >= MAX_TOKENS:
        return None
    a, b, d = form
    amount = -((-(tokens_in * a + tokens_out * b)) // d)
    if amount >= MAX_NANOS or amount <= -MAX_NANOS:
        return None
    return amount
