"""``reserve_for`` over a fixed set of priced candidates, as integer arithmetic.

A meta model reserves the worst case over every candidate its program can reach, on every
request (``meta_reserve``).  The candidates and their prices are fixed for one catalog snapshot
and caller; only the token counts change.  With flat per-token prices the reservation of one
candidate is ``ceil((input x in_price + output x out_price) / 1M x multipliers)`` nano-units,
so each price times its multipliers is turned once into an exact integer ratio and a request
costs two multiplications and one integer division per candidate -- the same number
``reserve_amount_nanos`` computes in ``Decimal``, bit for bit.

The integer form and its exactness bounds are ``gateway/billing/reserve_linear.py``'s (the
single-candidate reservation on the /v1 path uses the same); outside those bounds, and for tiered
or per-call prices, the candidate is priced by ``reserve_amount_nanos`` itself, so the result
is always the one it would give.
"""

from __future__ import annotations

from collections.abc import Sequence

from gateway.billing.estimate_reserve import reserve_amount_nanos
from gateway.billing.reserve_linear import linear_form, linear_nanos
from gateway.metering import Priced


def _linear(priced: Priced) -> tuple[int, int, int] | None:
    effective = priced.effective
    return linear_form(priced.prices, effective.group_multiplier,
                       effective.user_channel_multiplier)


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
        best: int | None = None
        for a, b, d, option in self._linear:
            amount = linear_nanos((a, b, d), input_tokens, output)
            if amount is None:
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
