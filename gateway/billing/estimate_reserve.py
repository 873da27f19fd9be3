"""The amount a request must be able to pay before it is sent upstream (its reservation).

Admission reserves the worst case so that a call admitted now can always be settled later:
the estimated input tokens plus the most output the call may produce (the client's
``max_tokens``/``max_output_tokens``, or a configured default reserve when it gave none),
priced with the same function settlement uses.  Pure arithmetic, no I/O.
"""

from __future__ import annotations

from decimal import ROUND_CEILING, Decimal, localcontext

from gateway.billing.cost import EXACT, ONE, PER, QUOTA_PER_CALL, PriceSet, base_cost
from gateway.billing.money import NANO, to_nanos
from gateway.billing.usage import Usage

#: output tokens reserved when the client sets no limit (callers pass the live setting)
DEFAULT_OUTPUT_RESERVE = 4096


def reserve_amount(prices: PriceSet, estimated_input_tokens: int,
                   max_output_tokens: int | None = None, *,
                   default_output_reserve: int = DEFAULT_OUTPUT_RESERVE,
                   group_multiplier: Decimal = ONE, user_channel_multiplier: Decimal = ONE,
                   units: int = 1) -> Decimal:
    """Worst-case cost in units, rounded UP to a nano-unit (never under-reserves).

    Token-priced models: all estimated input at the input price (no cache discount assumed) and
    ``max_output_tokens`` (or ``default_output_reserve``) of output.  Per-call models
    (``quota_type`` 1): ``units`` calls, one by default.
    """
    if prices.quota_type == QUOTA_PER_CALL:
        usage = Usage(output=max(1, units) * 1_000_000)
    else:
        output = max_output_tokens if max_output_tokens and max_output_tokens > 0 else (
            default_output_reserve)
        if not prices.tiers:
            # flat prices (the common case, admitted on every request): the same sum
            # ``base_cost`` makes -- all input at the input price, no media or cache carve-outs
            # because the estimate has none -- in the exact context's own arithmetic (no
            # ``Usage``, no context switch)
            ctx = EXACT
            base = ctx.divide(ctx.add(ctx.multiply(max(0, estimated_input_tokens), prices.input),
                                      ctx.multiply(max(0, output), prices.output)), PER)
            exact = ctx.multiply(ctx.multiply(base, group_multiplier), user_channel_multiplier)
            return exact.quantize(NANO, rounding=ROUND_CEILING, context=ctx)
        usage = Usage(input=max(0, estimated_input_tokens), output=max(0, output))
    with localcontext(EXACT):
        base, _, _ = base_cost(usage, prices, explain=False)
        exact = base * group_multiplier * user_channel_multiplier
        return exact.quantize(NANO, rounding=ROUND_CEILING)


def reserve_amount_nanos(prices: PriceSet, estimated_input_tokens: int,
                         max_output_tokens: int | None = None, **options: object) -> int:
    """``reserve_amount`` in integer nano-units (what ``Wallets.reserve`` takes)."""
    return to_nanos(reserve_amount(prices, estimated_input_tokens, max_output_tokens,
                                   **options))  # type: ignore[arg-type]
