"""Worked examples for every precedence rule of the effective-price function."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal as D

from gateway.billing.pricing import (
    PRICE_NAMES,
    GroupRate,
    active_group_ids,
    base_prices,
    combine_mode,
    effective_prices,
    group_multiplier,
    normalize_quota_type,
    scale_tiers,
    scale_video_config,
)

MODEL = {"input_price": D("0.3"), "output_price": D("1.2"), "cached_input_price": D("0.03"),
         "audio_input_price": D("4")}
NOW = datetime(2027, 1, 1, tzinfo=UTC)


def test_base_is_the_global_price_in_every_dimension():
    base = base_prices(MODEL)
    assert set(base) == set(PRICE_NAMES)
    assert base["input_price"] == D("0.3") and base["image_output_price"] == 0


def test_non_null_override_wins_null_inherits_and_zero_is_an_override():
    base = base_prices(MODEL, {"input_price": D("0.25"), "output_price": None,
                               "cached_input_price": D(0)})
    assert base["input_price"] == D("0.25")
    assert base["output_price"] == D("1.2")
    assert base["cached_input_price"] == 0


def test_only_the_five_overridable_dimensions_can_be_overridden():
    base = base_prices(MODEL, {"audio_input_price": D("1"), "image_input_price": D("2")})
    assert base["audio_input_price"] == D("4")
    assert base["image_input_price"] == D("2")


def test_group_multiplier_config_override_beats_channel_and_group():
    groups = [GroupRate(1, D("0.9"))]
    assert group_multiplier(groups, {1: D("0.5")}, {1: D("0.7")}) == D("0.5")


def test_zero_config_override_falls_back_to_channel_override():
    groups = [GroupRate(1, D("0.9"))]
    assert group_multiplier(groups, {1: D(0)}, {1: D("0.7")}) == D("0.7")
    assert group_multiplier(groups, {}, {1: D("0.7")}) == D("0.7")


def test_no_overrides_use_the_group_multiplier_and_zero_means_one():
    assert group_multiplier([GroupRate(1, D("0.9"))], {}, {1: D(0)}) == D("0.9")
    assert group_multiplier([GroupRate(1, D(0))], {}, {}) == D(1)


def test_overrides_for_other_groups_do_not_apply():
    assert group_multiplier([GroupRate(1, D("0.9"))], {2: D("0.1")}, {3: D("0.2")}) == D("0.9")


def test_modes_combine_per_group_values():
    groups = [GroupRate(1, D("0.8")), GroupRate(2, D("1.5")), GroupRate(3, D(0))]
    # per group: 0.8, channel override 1.2 for group 2, 0 -> 1 for group 3
    channel = {2: D("1.2")}
    assert group_multiplier(groups, {}, channel, "min") == D("0.8")
    for mode in ("max", "high", "higher", "MAX"):
        assert group_multiplier(groups, {}, channel, mode) == D("1.2")
    assert group_multiplier(groups, {}, channel, "nonsense") == D("0.8")
    assert combine_mode("") == "min"


def test_no_groups_is_one():
    assert group_multiplier([], {1: D("0.1")}, {1: D("0.2")}) == D(1)


def test_active_groups_skip_expired_and_fall_back_to_primary():
    later, earlier = NOW + timedelta(days=1), NOW - timedelta(seconds=1)
    assert active_group_ids([(3, None), (2, later), (4, earlier)], 1, NOW) == [2, 3]
    assert active_group_ids([(4, earlier)], 1, NOW) == [1]
    assert active_group_ids([], 1, NOW) == [1]
    assert active_group_ids([(5, NOW)], 1, NOW) == [1]  # expiring now = expired
    assert active_group_ids([], None, NOW) == []


def test_effective_is_base_times_group_times_user_channel():
    result = effective_prices(MODEL, {"output_price": D("1")}, [GroupRate(1, D("0.8"))], {}, {},
                              D("1.5"))
    assert result.group_multiplier == D("0.8")
    assert result.user_channel_multiplier == D("1.5")
    assert result.multiplier == D("1.2")
    assert result.prices["input_price"] == D("0.36")
    assert result.prices["output_price"] == D("1.2")
    assert result.prices["cached_input_price"] == D("0.036")
    assert result.base["output_price"] == D("1")


def test_zero_user_channel_multiplier_bills_as_one():
    result = effective_prices(MODEL, {}, [], {}, {}, D(0))
    assert result.user_channel_multiplier == 1
    assert result.prices["input_price"] == D("0.3")


def test_arithmetic_is_exact_at_the_limits():
    price = D("999999999999.999999999")
    result = effective_prices({"input_price": price}, {}, [GroupRate(1, D("0.000000001"))], {},
                              {}, D("1.000000001"))
    # 999.999999999999999999 x 1.000000001, with no digit lost (28-digit default would round)
    assert str(result.prices["input_price"]) == "1000.000000999999999998999999999"


def test_full_precedence_worked_example():
    # two active groups; config overrides group 1, channel overrides group 2, group 3 plain
    groups = [GroupRate(1, D("2")), GroupRate(2, D("2")), GroupRate(3, D("0.95"))]
    result = effective_prices(
        {"input_price": D("10"), "output_price": D("30")}, {"input_price": D("8")}, groups,
        {1: D("0.5"), 2: D(0)}, {1: D("3"), 2: D("0.6")}, D("1.1"), mode="max")
    # per group: 0.5 (config), 0.6 (channel), 0.95 (group) -> max 0.95
    assert result.group_multiplier == D("0.95")
    assert result.prices["input_price"] == D("8.36")
    assert result.prices["output_price"] == D("31.35")
    low = effective_prices(
        {"input_price": D("10")}, {}, groups, {1: D("0.5")}, {2: D("0.6")}, D("1"))
    assert low.group_multiplier == D("0.5")
    assert low.prices["input_price"] == D("5")


def test_quota_type_normalisation():
    assert [normalize_quota_type(v) for v in (0, 1, 100, 2, None, "1")] == [0, 1, 100, 0, 0, 0]


def test_tiers_and_video_configs_scale_every_price():
    tiers = scale_tiers([{"min_tokens": 0, "price": "1.25"},
                         {"min_tokens": 200000, "price": "2.5", "condition": "x"}], D("2"))
    assert tiers == [{"min_tokens": 0, "price": D("2.5")},
                     {"min_tokens": 200000, "price": D("5"), "condition": "x"}]
    video = scale_video_config({"resolutions": [
        {"resolution": "720p", "duration_unit_price": "0.12"},
        {"resolution": "1280x720", "durations": [{"seconds": 5, "price": "0.6"}]}]}, D("1.5"))
    assert video == {"resolutions": [
        {"resolution": "720p", "duration_unit_price": D("0.18")},
        {"resolution": "1280x720", "durations": [{"seconds": 5, "price": D("0.9")}]}]}
    assert scale_video_config(None, D(2)) == {"resolutions": []}
