"""Admission's reservation through the integer form is ``reserve_amount_nanos`` exactly."""

from __future__ import annotations

import random
from decimal import Decimal

from twisted.trial.unittest import TestCase

from gateway.billing.cost import PriceSet, billing_tiers
from gateway.billing.estimate_reserve import reserve_amount_nanos
from gateway.billing.pricing import EffectivePrices
from gateway.billing.reserve_linear import linear_form, linear_nanos
from gateway.metering import Priced, reserve_for

PRICES = [Decimal(0), Decimal("0.5"), Decimal(3), Decimal("12.000000001"), Decimal("0.07"),
          Decimal("0.000000001"), Decimal("123456789.123456789"), Decimal("-2.5")]
MULTIPLIERS = [Decimal(1), Decimal("0.333"), Decimal("1.25"), Decimal(3), Decimal("0.1"),
               Decimal("0.000000007"),
               Decimal("0.3333333333333333333333333")]  # 25 digits: outside the exact bounds


def option(rng: random.Random) -> Priced:
    tiers = ({"input": billing_tiers([{"min_tokens": 0, "price": "1"},
                                      {"min_tokens": 500, "price": "4"}])}
             if rng.random() < 0.1 else {})
    prices = PriceSet(input=rng.choice(PRICES), output=rng.choice(PRICES), tiers=tiers,
                      quota_type=1 if rng.random() < 0.1 else 0)
    effective = EffectivePrices(base={}, group_multiplier=rng.choice(MULTIPLIERS),
                                user_channel_multiplier=rng.choice(MULTIPLIERS), prices={})
    return Priced(candidate=None, effective=effective, prices=prices)  # type: ignore[arg-type]


def reference(options: list[Priced], input_tokens: int, max_output: int | None,
              default_output: int) -> int:
    """What ``reserve_for`` computed before the integer form: Decimal for every option."""
    return max(reserve_amount_nanos(
        p.prices, input_tokens, max_output, default_output_reserve=default_output,
        group_multiplier=p.effective.group_multiplier,
        user_channel_multiplier=p.effective.user_channel_multiplier) for p in options)


class ReserveForTests(TestCase):
    def test_reserve_for_is_the_decimal_computation_to_the_nano_unit(self) -> None:
        rng = random.Random(22)
        for _ in range(4000):
            options = [option(rng) for _ in range(rng.randint(1, 3))]
            for _ in range(3):
                tokens = (rng.choice([-5, 0, 1, 7, 999, 12_345, 10**9, 10**15, 10**16]),
                          rng.choice([None, 0, -3, 1, 333, 100_000, 10**15, 10**16]),
                          rng.choice([0, -1, 4096]))
                assert reserve_for(options, *tokens) == reference(options, *tokens), (
                    options, tokens)

    def test_flat_prices_take_the_integer_form(self) -> None:
        priced = Priced(candidate=None,  # type: ignore[arg-type]
                        effective=EffectivePrices(base={}, group_multiplier=Decimal("1.5"),
                                                  user_channel_multiplier=Decimal(1),
                                                  prices={}),
                        prices=PriceSet(input=Decimal(2), output=Decimal(6)))
        form = priced.reserve_form
        assert form is not None and priced.reserve_form is form  # computed once
        # (1000 x 2 + 500 x 6) / 1M x 1.5 = 0.0075 units = 7,500,000 nanos
        assert linear_nanos(form, 1000, 500) == 7_500_000
        assert reserve_for([priced], 1000, 500, 4096) == 7_500_000
        # one token of a 1/3-priced model rounds up to the next nano-unit
        third = linear_form(PriceSet(input=Decimal("0.000333"), output=Decimal(0)),
                            Decimal(1), Decimal(1))
        assert third is not None and linear_nanos(third, 1, 0) == 1

    def test_tiered_per_call_and_long_factors_have_no_integer_form(self) -> None:
        tiers = {"input": billing_tiers([{"min_tokens": 0, "price": "1"}])}
        assert linear_form(PriceSet(input=Decimal(1), tiers=tiers), Decimal(1), Decimal(1)) \
            is None
        assert linear_form(PriceSet(output=Decimal(1), quota_type=1), Decimal(1),
                           Decimal(1)) is None
        assert linear_form(PriceSet(input=Decimal(1)), Decimal("0." + "3" * 25),
                           Decimal(1)) is None
        form = linear_form(PriceSet(input=Decimal(1)), Decimal(1), Decimal(1))
        assert form is not None and linear_nanos(form, 10**15, 0) is None

    def test_no_candidate_is_refused(self) -> None:
        with self.assertRaises(ValueError):
            reserve_for([], 1, 1, 1)
