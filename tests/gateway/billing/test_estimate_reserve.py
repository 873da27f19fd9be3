"""The admission reservation is the worst case of what settlement can charge."""

from __future__ import annotations

from decimal import Decimal as D

from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.billing.cost import PriceSet, billing_tiers, compute_cost
from gateway.billing.estimate_reserve import reserve_amount, reserve_amount_nanos
from gateway.billing.usage import Usage

PRICES = PriceSet(input=D("1.25"), output=D(10), cached_input=D("0.125"))


def test_uses_max_tokens_when_given() -> None:
    # 1000 * 1.25 + 200 * 10 per 1M
    assert reserve_amount(PRICES, 1000, 200) == D("0.00325")
    assert reserve_amount_nanos(PRICES, 1000, 200) == 3_250_000


def test_falls_back_to_the_default_output_reserve() -> None:
    assert reserve_amount(PRICES, 1000) == D("0.04221")  # 1250 + 4096 * 10
    assert reserve_amount(PRICES, 1000, 0, default_output_reserve=100) == D("0.00225")
    assert reserve_amount(PRICES, 1000, None, default_output_reserve=0) == D("0.00125")


def test_applies_multipliers_and_rounds_up() -> None:
    assert reserve_amount(PRICES, 1000, 200, group_multiplier=D(2),
                          user_channel_multiplier=D("1.5")) == D("0.00975")
    # 1 token at 0.0001 per 1M is 0.1 nano: reserve a whole nano, never zero
    assert reserve_amount(PriceSet(input=D("0.0001")), 1, 0, default_output_reserve=0) == D(
        "0.000000001")


def test_per_call_models_reserve_one_unit_or_the_units_asked() -> None:
    per_call = PriceSet(output=D("0.04"), input=D(99), quota_type=1)
    assert reserve_amount(per_call, 50_000, 9999) == D("0.04")
    assert reserve_amount(per_call, 0, None, units=4, group_multiplier=D("0.5")) == D("0.08")


def test_tiers_are_applied_to_the_estimate() -> None:
    tiered = PriceSet(input=D(1), output=D(2), tiers={"output": billing_tiers([
        {"min_tokens": 100_000, "price": "4", "condition": "full_input_tokens"}])})
    assert reserve_amount(tiered, 200_000, 1000) == D("0.204")


@settings(max_examples=200, deadline=None)
@given(inp=st.integers(0, 2_000_000), out=st.integers(0, 100_000),
       cached=st.integers(0, 2_000_000), produced=st.integers(0, 100_000))
def test_reservation_covers_any_outcome_within_the_limits(inp: int, out: int, cached: int,
                                                          produced: int) -> None:
    produced = min(produced, out)
    cached = min(cached, inp)
    reserved = reserve_amount(PRICES, inp, out or None, default_output_reserve=out)
    actual = compute_cost(Usage(input=inp, cache_read=cached, output=produced), PRICES).cost
    assert reserved >= actual


@settings(max_examples=300, deadline=None)
@given(inp=st.integers(0, 2_000_000), out=st.integers(1, 200_000),
       nanos=st.lists(st.integers(0, 10**12), min_size=9, max_size=9),
       group=st.decimals("0", "10", places=4), channel=st.decimals("0", "10", places=4))
def test_flat_price_shortcut_equals_the_full_pricing(inp: int, out: int, nanos: list[int],
                                                     group: D, channel: D) -> None:
    from decimal import ROUND_CEILING, localcontext

    from gateway.billing.cost import DIMENSIONS, EXACT, base_cost
    from gateway.billing.money import NANO, from_nanos
    from gateway.billing.usage import Usage
    prices = PriceSet(**{dim: from_nanos(n) for dim, n in zip(DIMENSIONS, nanos)})
    full, _, _ = base_cost(Usage(input=inp, output=out), prices)
    with localcontext(EXACT):
        expected = (full * group * channel).quantize(NANO, rounding=ROUND_CEILING)
    assert reserve_amount(prices, inp, out, group_multiplier=group,
                          user_channel_multiplier=channel) == expected
