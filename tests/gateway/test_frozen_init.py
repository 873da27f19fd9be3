"""``direct_init``: the records a /v1 call makes are built exactly as ``dataclasses`` builds them.

Every decorated class is constructed twice from the same arguments -- once through its fast
``__init__``, once through the one ``dataclasses`` generated (kept in ``GENERATED``) -- and the
two instances must hold the same fields, compare equal and hash alike; defaults and default
factories too.  A fast ``__init__`` that dropped, swapped or shared a value fails here.
"""

from __future__ import annotations

import dataclasses
import random
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from twisted.trial.unittest import TestCase

import gateway.auth
import gateway.billing.cost
import gateway.billing.usage
import gateway.ledger.settlement
import gateway.limits
import gateway.v1.outcome  # noqa: F401 -- imported for their decorated classes
from gateway.billing.usage import Usage
from gateway.frozen_init import GENERATED, direct_init
from gateway.ledger.settlement import SettlementRecord
from gateway.limits import Verdict

#: the records of the /v1 hot path that must use it (a class dropped from here is a regression
#: of issue 22, not a failure of this test's purpose)
HOT = {"Usage", "Cost", "SettlementRecord", "SettledCharge", "Served", "Verdict",
       "UserChannelLimit", "Caller"}


def _value(rng: random.Random, index: int) -> Any:
    """A distinct value per field and draw, of varied kinds."""
    kind = rng.randrange(5)
    if kind == 0:
        return rng.randrange(-10**12, 10**12)
    if kind == 1:
        return f"text-{index}-{rng.random()}"
    if kind == 2:
        return Decimal(rng.randrange(10**9)) / 1000
    if kind == 3:
        return (index, rng.random())
    return datetime.fromtimestamp(rng.randrange(2 * 10**9), UTC)


def _built_by_dataclasses(cls: type, *args: Any, **kwargs: Any) -> Any:
    instance = object.__new__(cls)
    GENERATED[cls](instance, *args, **kwargs)
    return instance


class DirectInitTests(TestCase):
    def test_the_hot_records_use_it(self) -> None:
        assert {cls.__name__ for cls in GENERATED} >= HOT

    def test_every_field_given_positionally_or_by_name(self) -> None:
        rng = random.Random(22)
        for cls in GENERATED:
            names = [f.name for f in dataclasses.fields(cls)]
            for _ in range(200):
                values = [_value(rng, i) for i in range(len(names))]
                fast, slow = cls(*values), _built_by_dataclasses(cls, *values)
                assert fast.__dict__ == slow.__dict__ == dict(zip(names, values, strict=True))
                assert fast == slow and hash(fast) == hash(slow) and repr(fast) == repr(slow)
                named = dict(zip(names, values, strict=True))
                assert cls(**named) == slow

    def test_defaults_and_factories(self) -> None:
        for cls in GENERATED:
            required = [f for f in dataclasses.fields(cls)
                        if f.default is dataclasses.MISSING
                        and f.default_factory is dataclasses.MISSING]
            args = [f"req-{f.name}" for f in required]
            fast, slow = cls(*args), _built_by_dataclasses(cls, *args)
            assert fast.__dict__ == slow.__dict__, cls
            assert list(fast.__dict__) == [f.name for f in dataclasses.fields(cls)], cls
        # a factory runs per instance: two verdicts never share their headers
        first, second = Verdict(True), Verdict(True)
        assert first.headers == {} and first.headers is not second.headers
        assert SettlementRecord("r", 1).usage == Usage()

    def test_still_frozen_and_replaceable(self) -> None:
        usage = Usage(input=3, output=4)
        with self.assertRaises(dataclasses.FrozenInstanceError):
            usage.input = 5  # type: ignore[misc]
        assert dataclasses.replace(usage, output=9) == Usage(input=3, output=9)
        assert usage.clamped() is usage
        assert Usage(input=1, cache_read=5).clamped() == Usage(input=5, cache_read=5)

    def test_unsupported_classes_are_refused(self) -> None:
        @dataclasses.dataclass
        class Mutable:
            a: int

        @dataclasses.dataclass(frozen=True, slots=True)
        class Slotted:
            a: int

        @dataclasses.dataclass(frozen=True)
        class PostInit:
            a: int

            def __post_init__(self) -> None:
                pass

        @dataclasses.dataclass(frozen=True)
        class NotInInit:
            a: int
            b: int = dataclasses.field(default=0, init=False)

        @dataclasses.dataclass(frozen=True)
        class WithInitVar:
            a: int
            b: dataclasses.InitVar[int] = 0

        for cls in (Mutable, Slotted, PostInit, NotInInit, WithInitVar):
            with self.assertRaises(TypeError):
                direct_init(cls)

    def test_field_names_cannot_collide_with_the_generated_code(self) -> None:
        @direct_init
        @dataclasses.dataclass(frozen=True)
        class Awkward:
            instance_dict: int
            no_default: int = 1
            default_no_default: int = 2
            self_: list[int] = dataclasses.field(default_factory=list)
            factory_self_: dict[str, int] = dataclasses.field(default_factory=dict)

        built = Awkward(7, 8, 9, [10], {"a": 11})
        assert dataclasses.astuple(built) == (7, 8, 9, [10], {"a": 11})
        assert Awkward(1) == _built_by_dataclasses(Awkward, 1)
        assert Awkward(1).__dict__ == {"instance_dict": 1, "no_default": 1,
                                       "default_no_default": 2, "self_": [],
                                       "factory_self_": {}}
