"""``request_cached`` computes a value once per object, like ``functools.cached_property``."""

from __future__ import annotations

from decimal import Decimal

from twisted.trial.unittest import TestCase

from gateway.billing.cost import Cost, PriceSet, compute_cost
from gateway.billing.money import to_nanos
from gateway.billing.per_request_cache import request_cached
from gateway.billing.usage import Usage


class Counted:
    def __init__(self, value: int) -> None:
        self.value = value
        self.calls = 0

    @request_cached
    def doubled(self) -> int:
        """Twice the value."""
        self.calls += 1
        return self.value * 2


class RequestCachedTests(TestCase):
    def test_computed_once_per_object(self) -> None:
        one, two = Counted(2), Counted(5)
        assert (one.doubled, one.doubled, two.doubled) == (4, 4, 10)
        assert (one.calls, two.calls) == (1, 1)

    def test_the_class_attribute_is_the_descriptor(self) -> None:
        descriptor = Counted.doubled
        assert isinstance(descriptor, request_cached)
        assert descriptor.__doc__ == "Twice the value."

    def test_a_costs_nanos_are_its_decimals_in_nanos(self) -> None:
        cost = compute_cost(Usage(input=1234, output=567),
                            PriceSet(input=Decimal("0.3"), output=Decimal("1.7")),
                            Decimal("1.25"), Decimal("0.9"))
        assert isinstance(cost, Cost)
        assert cost.cost_nanos == to_nanos(cost.cost) == cost.cost_nanos
        assert cost.base_cost_nanos == to_nanos(cost.base_cost)
        assert cost.group_multiplier_nanos == 1_250_000_000
        assert cost.user_channel_multiplier_nanos == 900_000_000
        assert vars(cost)["cost_nanos"] == cost.cost_nanos  # kept on the object
