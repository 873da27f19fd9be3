"""The flat-price shortcuts of pricing give exactly what the general (tiered) path gives.

Admission (``reserve_amount``) and settlement (``compute_cost``) take a shortcut when a price set
has no tiers: no ``Usage`` or context switch for the reservation, price texts cached per price
set for the usage-log formula.  A price set with a tier on a dimension the request does not
use goes through the general path while charging the same, so the two must agree on every
amount, count and formula character.
"""

from __future__ import annotations

from decimal import ROUND_HALF_EVEN, localcontext
from decimal import Decimal as D

from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.billing.cost import EXACT, PriceSet, billing_tiers, compute_cost, with_multipliers
from gateway.billing.estimate_reserve import reserve_amount
from gateway.billing.money import NANO, to_nanos
from gateway.billing.usage import Usage

#: a tier on audio output, which these requests never produce: forces the general path
UNUSED_TIER = {"audio_output": billing_tiers([{"min_tokens": 0, "price": "7"}])}

nanos = st.integers(min_value=0, max_value=10**12).map(lambda n: D(n).scaleb(-9))
multipliers = st.sampled_from([D(1), D("1.0"), D("0.8"), D("1.5"), D("2"), D("0.333333333")])
tokens = st.integers(min_value=-5, max_value=2_000_000)


def both(**prices: D) -> tuple[PriceSet, PriceSet]:
    return PriceSet(**prices), PriceSet(**prices, tiers=UNUSED_TIER)


@settings(max_examples=300, deadline=None)
@given(nanos, nanos, tokens, st.one_of(st.none(), tokens), multipliers, multipliers)
def test_the_flat_reservation_equals_the_general_one(input_price: D, output_price: D,
                                                     estimated: int, max_output: int | None,
                                                     group: D, channel: D) -> None:
    flat, tiered = both(input=input_price, output=output_price)
    options = {"default_output_reserve": 4096, "group_multiplier": group,
               "user_channel_multiplier": channel}
    assert (reserve_amount(flat, estimated, max_output, **options)
            == reserve_amount(tiered, estimated, max_output, **options))


@settings(max_examples=300, deadline=None)
@given(nanos, nanos, nanos, st.integers(0, 10**7), st.integers(0, 10**6),
       st.integers(0, 10**6), multipliers, multipliers)
def test_the_flat_cost_and_formula_equal_the_general_ones(
        input_price: D, output_price: D, cached_price: D, input_tokens: int,
        output_tokens: int, cached: int, group: D, channel: D) -> None:
    flat, tiered = both(input=input_price, output=output_price, cached_input=cached_price)
    usage = Usage(input=input_tokens + cached, output=output_tokens, cache_read=cached)
    fast, general = (compute_cost(usage, flat, group, channel),
                     compute_cost(usage, tiered, group, channel))
    assert fast.cost == general.cost and fast.base_cost == general.base_cost
    assert fast.counts == general.counts
    assert fast.formula == general.formula


def test_the_formula_reads_as_before() -> None:
    cost = compute_cost(Usage(input=1000, output=500), PriceSet(input=D("1.25"), output=D(10)),
                        D("1.0"), D("0.8"))
    assert cost.formula == ("(input 1000 * 1.25 + output 500 * 10) / 1M = 0.00625; "
                            "* group 1 * channel 0.8 = 0.005")


#: 1 written every way: ``with_multipliers`` skips a product by a multiplier equal to 1
ones = st.sampled_from([D(1), D("1.0"), D("1.000000000"), D("1E0"), D("0.1E1"), D("10E-1")])
long_multipliers = st.one_of(
    multipliers, ones, st.decimals(min_value=0, max_value=1000, places=12, allow_nan=False,
                             allow_infinity=False))


@settings(max_examples=300, deadline=None)
@given(st.decimals(min_value=0, max_value=10**9, places=30, allow_nan=False,
                   allow_infinity=False), long_multipliers, long_multipliers)
def test_the_multiplied_cost_is_the_exact_contexts(base: D, group: D, channel: D) -> None:
    """``with_multipliers`` calls the exact context's methods instead of switching to it:
    the same rounding, and the multipliers' nanos (kept per value) are ``to_nanos``'."""
    with localcontext(EXACT):
        expected = (base * group * channel).quantize(NANO, rounding=ROUND_HALF_EVEN)
    cost = with_multipliers(base, group, channel)
    assert cost.cost == expected and str(cost.cost) == str(expected)
    assert cost.group_multiplier_nanos == to_nanos(group)
    assert cost.user_channel_multiplier_nanos == to_nanos(channel)
    again = with_multipliers(base, group, channel)  # the kept nanos answer the second time
    assert again.group_multiplier_nanos == to_nanos(group)
    assert again.user_channel_multiplier_nanos == to_nanos(channel)
