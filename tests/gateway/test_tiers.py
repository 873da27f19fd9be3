"""Price tier normalisation (console contract §5.9)."""

from __future__ import annotations

from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gateway.billing.tiers import (
    FULL_INPUT,
    FULL_REQUEST,
    Tier,
    TierError,
    canonical_condition,
    load_tiers,
    normalise_tiers,
)


def test_empty_and_null_mean_no_tiers() -> None:
    assert normalise_tiers(None) is None
    assert normalise_tiers([]) is None


def test_normalises_sorts_and_dedupes_last_wins() -> None:
    tiers = normalise_tiers([
        {"min_tokens": 200000, "price": 2.5},
        {"min_tokens": 0, "price": "1.25", "condition": ""},
        {"min_tokens": 200000, "price": "3.00"},
        {"min_tokens": 128000, "price": "5", "condition": "prompt_tokens"},
        {"min_tokens": "1000", "price": "4", "condition": "Context-Tokens"},
    ])
    assert tiers == [
        {"min_tokens": 0, "price": "1.25", "condition": ""},
        {"min_tokens": 200000, "price": "3", "condition": ""},
        {"min_tokens": 1000, "price": "4", "condition": FULL_INPUT},
        {"min_tokens": 128000, "price": "5", "condition": FULL_INPUT},
    ]


def test_negative_entries_are_dropped() -> None:
    assert normalise_tiers([{"min_tokens": -1, "price": "1"},
                            {"min_tokens": 10, "price": "-0.5"}]) is None
    assert normalise_tiers([{"min_tokens": -1, "price": "1"},
                            {"min_tokens": 5, "price": "0"}]) == [
        {"min_tokens": 5, "price": "0", "condition": ""}]


@pytest.mark.parametrize("value", [
    "not a list", {"min_tokens": 1}, [1], [{"min_tokens": 1}], [{"price": "x"}],
    [{"min_tokens": 1.5, "price": 1}], [{"min_tokens": True, "price": 1}],
    [{"min_tokens": 1, "price": 1, "condition": 5}], [{"min_tokens": 1, "price": "1e400"}],
    [{"min_tokens": 1, "price": "0.0000000001"}],
])
def test_malformed_input_is_refused(value: object) -> None:
    with pytest.raises(TierError):
        normalise_tiers(value)


def test_condition_synonyms() -> None:
    assert canonical_condition("current_tokens") == ""
    assert canonical_condition("total_tokens") == FULL_REQUEST
    assert canonical_condition("completion_tokens") == "billable_output_tokens"
    assert canonical_condition("something else") == ""


def test_load_gives_decimals() -> None:
    stored = normalise_tiers([{"min_tokens": 0, "price": "0.3"}])
    assert load_tiers(stored) == [Tier(0, Decimal("0.3"), "")]
    assert load_tiers(None) == []


tier_entry = st.fixed_dictionaries({
    "min_tokens": st.integers(-5, 10**7),
    "price": st.decimals(min_value=-10, max_value=1000, places=4, allow_nan=False,
                         allow_infinity=False).map(str),
    "condition": st.sampled_from(["", "prompt_tokens", "total_tokens", "bogus"]),
})


@given(st.lists(tier_entry, max_size=20))
def test_normalisation_is_idempotent_sorted_and_unique(entries: list[dict]) -> None:
    once = normalise_tiers(entries)
    assert normalise_tiers(once) == once
    items = once or []
    keys = [(t["condition"], t["min_tokens"]) for t in items]
    assert keys == sorted(set(keys))
    assert all(t["min_tokens"] >= 0 and Decimal(t["price"]) >= 0 for t in items)
