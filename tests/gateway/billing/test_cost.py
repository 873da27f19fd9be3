"""Cost computation: worked examples of contract §10.4 / §5.9, and properties over random usage."""

from __future__ import annotations

from decimal import Decimal as D

from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.billing.cost import PriceSet, billing_tiers, compute_cost, with_multipliers
from gateway.billing.tiers import Tier
from gateway.billing.usage import Usage

FLAT = PriceSet(input=D("1.25"), output=D("10"))


def cost(usage: Usage, prices: PriceSet, g: str = "1", c: str = "1") -> D:
    return compute_cost(usage, prices, D(g), D(c)).cost


def test_flat_input_and_output() -> None:
    result = compute_cost(Usage(input=1000, output=500), FLAT, D(1), D(1))
    # (1000 * 1.25 + 500 * 10) / 1M
    assert result.base_cost == D("0.00625")
    assert result.cost == D("0.00625")
    assert result.cost_nanos == 6_250_000
    assert result.counts["input"] == 1000 and result.counts["output"] == 500
    assert "input 1000 * 1.25" in result.formula and "output 500 * 10" in result.formula


def test_cache_reads_and_writes_are_carved_out_of_input() -> None:
    prices = PriceSet(input=D(3), cached_input=D("0.3"), cache_write_5m=D("3.75"),
                      cache_write_1h=D(6), output=D(15))
    usage = Usage(input=10_000, cache_read=4000, cache_write_5m=1000, cache_write_1h=500,
                  output=200)
    result = compute_cost(usage, prices)
    # billable input 4500*3 + 4000*0.3 + 1000*3.75 + 500*6 + 200*15 = 24450 per 1M
    assert result.counts["input"] == 4500
    assert result.cost == D("0.02445")


def test_cache_reads_without_a_cached_price_are_free() -> None:
    result = compute_cost(Usage(input=1000, cache_read=400, output=0), FLAT)
    assert result.cost == D("0.00075")  # 600 * 1.25 / 1M


def test_image_tokens_priced_separately_only_with_a_dedicated_price() -> None:
    prices = PriceSet(input=D(2), output=D(8), image_output=D(40))
    usage = Usage(input=2000, image_in=500, output=1000, image_out=800)
    result = compute_cost(usage, prices)
    # image input has no price: stays in input; image output is carved out
    assert result.counts["input"] == 2000
    assert result.counts["image_input"] == 0
    assert result.counts["output"] == 200
    assert result.counts["image_output"] == 800
    assert result.cost == D("0.0376")  # (4000 + 1600 + 32000) / 1M


def test_audio_input_with_a_dedicated_price() -> None:
    prices = PriceSet(input=D(1), output=D(2), audio_input=D(100))
    result = compute_cost(Usage(input=1000, audio_in=300, output=10), prices)
    assert result.counts["input"] == 700 and result.counts["audio_input"] == 300
    assert result.cost == D("0.03072")  # (700 + 30000 + 20) / 1M


def test_a_tier_price_alone_makes_a_dimension_dedicated() -> None:
    prices = PriceSet(input=D(1), image_input=D(0),
                      tiers={"image_input": billing_tiers([{"min_tokens": 0, "price": "5"}])})
    result = compute_cost(Usage(input=100, image_in=100), prices)
    assert result.counts == {**result.counts, "input": 0, "image_input": 100}
    assert result.cost == D("0.0005")


def test_progressive_brackets_when_no_tier_has_a_condition() -> None:
    prices = PriceSet(input=D("1.25"), output=D(10), tiers={
        "input": billing_tiers([{"min_tokens": 200_000, "price": "2.5", "condition": ""}])})
    # 200000 at the base price, the 50000 above the threshold at the tier price
    assert cost(Usage(input=250_000), prices) == D("0.375")
    assert cost(Usage(input=200_000), prices) == D("0.25")
    assert cost(Usage(input=100), prices) == D("0.000125")


def test_progressive_brackets_with_a_zero_threshold_never_use_the_base_price() -> None:
    prices = PriceSet(input=D(5), tiers={"input": billing_tiers([
        {"min_tokens": 200_000, "price": "2"}, {"min_tokens": 0, "price": "1"}])})
    assert cost(Usage(input=250_000), prices) == D("0.3")  # 200000*1 + 50000*2
    three = billing_tiers([{"min_tokens": 0, "price": "1"}, {"min_tokens": 10, "price": "2"},
                         {"min_tokens": 20, "price": "3", "condition": "current_tokens"}])
    prices = PriceSet(input=D(9), tiers={"input": three})
    # current_tokens is the default condition: still brackets (10*1 + 10*2 + 5*3)
    assert cost(Usage(input=25), prices) == D("0.000045")


def test_a_condition_selects_one_price_for_all_tokens() -> None:
    prices = PriceSet(input=D("1.25"), output=D(10), tiers={
        "output": billing_tiers([
            {"min_tokens": 200_000, "price": "15", "condition": "full_input_tokens"}])})
    # input >= 200k: all 1000 output tokens at 15
    assert cost(Usage(input=250_000, output=1000), prices) == D("0.3275")
    # below the threshold: base price
    assert cost(Usage(input=100_000, output=1000), prices) == D("0.135")


def test_the_largest_matching_threshold_wins_and_synonyms_are_understood() -> None:
    prices = PriceSet(input=D(1), tiers={"input": billing_tiers([
        {"min_tokens": 1000, "price": "2", "condition": "total_tokens"},
        {"min_tokens": 5000, "price": "3", "condition": "full_request_tokens"},
        {"min_tokens": 9000, "price": "4", "condition": "full_request_tokens"}])})
    assert cost(Usage(input=500, output=400), prices) == D("0.0005")      # 900: base
    assert cost(Usage(input=500, output=600), prices) == D("0.001")       # 1100: tier 2
    assert cost(Usage(input=4000, output=4000), prices) == D("0.012")     # 8000: tier 3


def test_billable_conditions_use_counts_after_carving() -> None:
    prices = PriceSet(input=D(1), cached_input=D("0.1"), output=D(1), tiers={"output": billing_tiers([
        {"min_tokens": 1000, "price": "9", "condition": "billable_input_tokens"}])})
    # full input 1500, but only 500 billable after the cache read: output keeps its base price
    assert cost(Usage(input=1500, cache_read=1000, output=10), prices) == D("0.00061")
    assert cost(Usage(input=1500, output=10), prices) == D("0.00159")


def test_mixed_default_and_conditioned_tiers_select_a_single_price() -> None:
    prices = PriceSet(input=D(1), tiers={"input": billing_tiers([
        {"min_tokens": 100, "price": "2", "condition": ""},
        {"min_tokens": 10_000, "price": "3", "condition": "full_request_tokens"}])})
    # the "" tier is measured on the dimension's own count; one price applies to all tokens
    assert cost(Usage(input=150), prices) == D("0.0003")
    assert cost(Usage(input=150, output=20_000), prices) == D("0.00045")


def test_per_call_pricing() -> None:
    prices = PriceSet(output=D("0.5"), input=D(100), quota_type=1)
    assert cost(Usage(), prices) == D("0.5")
    assert cost(Usage(input=10**6, output=1), prices) == D("0.5")
    assert cost(Usage(output=2_500_000), prices) == D("1.5")
    assert cost(Usage(output=3_000_000), prices, g="2") == D("3")
    assert compute_cost(Usage(output=2_000_000), prices).counts == {"calls": 2}


def test_multipliers_apply_to_the_base_and_round_once_half_even() -> None:
    result = compute_cost(Usage(input=1000, output=500), FLAT, D("0.8"), D("1.5"))
    assert result.base_cost == D("0.00625")
    assert result.cost == D("0.0075")
    assert "group 0.8 * channel 1.5 = 0.0075" in result.formula
    # 1.5 nano -> 2 and 2.5 nano -> 2 (half-even)
    assert cost(Usage(input=1), PriceSet(input=D("0.0015"))) == D("0.000000002")
    assert cost(Usage(input=1), PriceSet(input=D("0.0025"))) == D("0.000000002")
    # rounded once at the end: 0.4 nano * 3 = 1.2 nano -> 1 (rounding the base first gives 0)
    assert cost(Usage(input=1), PriceSet(input=D("0.0004")), g="3") == D("0.000000001")


def test_exact_with_huge_counts_and_prices() -> None:
    prices = PriceSet(input=D("123456.123456789"), output=D("987654.987654321"))
    result = compute_cost(Usage(input=999_999_937, output=999_999_929), prices, D("1.000000007"))
    expected = ((D(999_999_937) * D("123456.123456789") + D(999_999_929) * D("987654.987654321"))
                / D(10**6) * D("1.000000007"))
    assert result.cost == expected.quantize(D("1e-9"))


def test_clamping_negative_and_inconsistent_counts() -> None:
    # input is raised to cover the cache read; negatives count as zero
    assert cost(Usage(input=-5, cache_read=1000, output=-1), PriceSet(input=D(1),
                cached_input=D(2))) == D("0.002")


def test_price_set_from_a_model_row() -> None:
    row = {"quota_type": 0, "input_price_nanos": 1_250_000_000, "output_price_nanos": 10**10,
           "cached_input_price_nanos": 125_000_000, "output_price_tiers": [
               {"min_tokens": 0, "price": "8", "condition": ""},
               {"min_tokens": 1000, "price": "12", "condition": ""}],
           "input_price_tiers": None}
    prices = PriceSet.from_row(row)
    assert prices.input == D("1.25") and prices.output == D(10)
    assert prices.cached_input == D("0.125") and prices.image_input == 0
    assert prices.tiers_of("output") == (Tier(0, D(8), ""), Tier(1000, D(12), ""))
    assert prices.tiers_of("input") == ()
    assert cost(Usage(input=1000, output=1500), prices) == D("0.01525")  # 1250 + 8000 + 6000
    assert PriceSet.from_row({"quota_type": 7}).quota_type == 0
    assert prices.as_json()["input_price"] == "1.25"


def test_video_style_base_cost_uses_the_same_rounding() -> None:
    result = with_multipliers(D("0.3") * 2, D("0.9"), D(1), formula="2 videos * 0.3")
    assert result.cost == D("0.54") and result.formula.startswith("2 videos * 0.3 = 0.6")


# --- properties -----------------------------------------------------------------------------

counts = st.integers(min_value=0, max_value=5_000_000)
prices_st = st.decimals(min_value=0, max_value=1000, places=6, allow_nan=False)


@st.composite
def price_sets(draw: st.DrawFn) -> PriceSet:
    names = ("input", "output", "cached_input", "cache_write_5m", "cache_write_1h",
             "image_input", "image_output", "audio_input", "audio_output")
    values = {name: draw(prices_st) for name in names}
    tiers = {}
    for name in draw(st.lists(st.sampled_from(names), max_size=3, unique=True)):
        thresholds = sorted(draw(st.lists(counts, min_size=1, max_size=3, unique=True)))
        base = draw(prices_st)
        # prices that never fall as thresholds rise (what makes conditioned tiers monotonic)
        steps = [draw(prices_st) for _ in thresholds]
        condition = draw(st.sampled_from(["", "full_input_tokens", "full_request_tokens"]))
        running = base
        entries = []
        for threshold, step in zip(thresholds, steps):
            running += step
            entries.append({"min_tokens": threshold, "price": str(running),
                            "condition": condition})
        values[name] = base
        tiers[name] = billing_tiers(entries)
    return PriceSet(**values, tiers=tiers)


@st.composite
def usages(draw: st.DrawFn) -> Usage:
    return Usage(input=draw(counts), output=draw(counts), cache_read=draw(counts),
                 cache_write_5m=draw(counts), cache_write_1h=draw(counts),
                 image_in=draw(counts), image_out=draw(counts), audio_in=draw(counts),
                 audio_out=draw(counts)).clamped()


@settings(max_examples=300, deadline=None)
@given(usage=usages(), prices=price_sets(), extra_in=counts, extra_out=counts)
def test_cost_never_falls_when_input_or_output_grows(usage: Usage, prices: PriceSet,
                                                     extra_in: int, extra_out: int) -> None:
    from dataclasses import replace
    before = compute_cost(usage, prices).base_cost
    assert compute_cost(replace(usage, input=usage.input + extra_in), prices).base_cost >= before
    assert compute_cost(replace(usage, output=usage.output + extra_out),
                        prices).base_cost >= before


@settings(max_examples=200, deadline=None)
@given(prices=price_sets())
def test_zero_usage_costs_nothing(prices: PriceSet) -> None:
    result = compute_cost(Usage(), prices, D("1.7"), D("3"))
    assert result.cost == 0 and result.base_cost == 0


@settings(max_examples=300, deadline=None)
@given(usage=usages(), prices=price_sets(),
       g=st.decimals(min_value=0, max_value=100, places=4, allow_nan=False),
       c=st.decimals(min_value=0, max_value=100, places=4, allow_nan=False),
       k=st.integers(min_value=1, max_value=50))
def test_multipliers_scale_linearly(usage: Usage, prices: PriceSet, g: D, c: D, k: int) -> None:
    one = compute_cost(usage, prices, g, c)
    scaled = compute_cost(usage, prices, g * k, c)
    assert scaled.base_cost == one.base_cost
    # exact before the single rounding: k times the exact product, within half a nano each
    exact = one.base_cost * g * c
    assert abs(one.cost - exact) <= D("0.0000000005")
    assert abs(scaled.cost - exact * k) <= D("0.0000000005")
    assert compute_cost(usage, prices, g, c).cost == compute_cost(usage, prices, c, g).cost


@settings(max_examples=200, deadline=None)
@given(usage=usages(), prices=price_sets())
def test_the_priced_counts_never_exceed_the_tokens(usage: Usage, prices: PriceSet) -> None:
    counts_ = compute_cost(usage, prices).counts
    assert sum(counts_[d] for d in ("input", "cached_input", "cache_write_5m", "cache_write_1h",
                                    "image_input", "audio_input")) >= usage.input or (
        usage.cache_read + usage.cache_write_5m + usage.cache_write_1h + usage.image_in
        + usage.audio_in > usage.input)
    assert counts_["output"] + counts_["image_output"] + counts_["audio_output"] == usage.output


@settings(max_examples=300, deadline=None)
@given(fields=st.lists(st.integers(-50, 5_000), min_size=10, max_size=10))
def test_clamped_obeys_its_rules_and_is_idempotent(fields: list[int]) -> None:
    names = ("input", "output", "cache_read", "cache_write_5m", "cache_write_1h", "image_in",
             "image_out", "audio_in", "audio_out", "reasoning")
    raw = Usage(**dict(zip(names, fields)))
    u = raw.clamped()
    assert all(getattr(u, name) >= 0 for name in names)
    assert u.input >= u.cache_read + u.cache_write_5m + u.cache_write_1h
    assert u.input >= u.image_in + u.audio_in and u.output >= u.image_out + u.audio_out
    assert u.cache_read == max(0, raw.cache_read) and u.reasoning == max(0, raw.reasoning)
    assert u.input == max(max(0, raw.input), u.cache_read + u.cache_write_5m + u.cache_write_1h,
                          u.image_in + u.audio_in)
    assert u.clamped() is u  # already clamped: returned as is


@settings(max_examples=200, deadline=None)
@given(usage=usages(), prices=price_sets())
def test_unexplained_base_cost_is_the_same_number(usage: Usage, prices: PriceSet) -> None:
    from gateway.billing.cost import base_cost
    explained, counts, formula = base_cost(usage, prices)
    quick, quick_counts, empty = base_cost(usage, prices, explain=False)
    assert (quick, quick_counts, empty) == (explained, counts, "")
    assert formula
