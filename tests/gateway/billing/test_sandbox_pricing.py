"""§3.6's formulas to the nano-unit, computed here a second, independent way.

The code computes with exact fractions and rounds once; the expectation below is the
contract's text taken literally in 60-digit decimals (``hours = minutes / 60``, ``rate``,
``cost = hours x rate``) and rounded half-even to a nano-unit.
"""

from __future__ import annotations

import math
from datetime import timedelta
from decimal import ROUND_HALF_EVEN, Decimal, localcontext

import orjson
from twisted.trial.unittest import TestCase

from gateway.billing.money import to_nanos
from gateway.billing.sandbox_pricing import (
    HostPrices,
    billable_minutes,
    runtime_charge,
    storage_charge,
)

NANO = Decimal("0.000000001")


def prices(runtime: str = "0", cpu: str = "0", memory: str = "0", storage: str = "0",
           multiplier: str = "1") -> HostPrices:
    return HostPrices(
        runtime_price_hour_nanos=to_nanos(Decimal(runtime)),
        cpu_price_hour_nanos=to_nanos(Decimal(cpu)),
        memory_price_gb_hour_nanos=to_nanos(Decimal(memory)),
        storage_price_gb_hour_nanos=to_nanos(Decimal(storage)),
        runtime_multiplier_nanos=to_nanos(Decimal(multiplier)))


def contract_runtime_nanos(elapsed_seconds: Decimal, runtime: str, cpu: str, memory: str,
                           multiplier: str, cores: str, memory_mb: int) -> int:
    with localcontext() as ctx:
        ctx.prec = 60
        minutes = max(1, math.ceil(max(Decimal(0), elapsed_seconds) / 60))
        hours = Decimal(minutes) / 60
        memory_gb = Decimal(memory_mb) / 1024
        rate = (Decimal(runtime) + Decimal(cpu) * Decimal(cores)
                + Decimal(memory) * memory_gb) * Decimal(multiplier)
        cost = (hours * rate).quantize(NANO, rounding=ROUND_HALF_EVEN)
    return int(cost / NANO)


#: (elapsed s, runtime, cpu/core, memory/GB, multiplier, cores, memory MB)
CASES = [
    ("61", "0.5", "0.12", "0.05", "1.5", "0.25", 512),
    ("0.2", "0", "1.000000001", "0.333333333", "0.7", "3", 1536),
    ("120", "0.01", "0.02", "0.03", "1", "1", 1024),
    ("120.000001", "0.01", "0.02", "0.03", "1", "1", 1024),
    ("3599", "2", "0.000000007", "0.000000011", "2.5", "0.333333333", 333),
    ("86400", "1.23", "4.56", "7.89", "0.1", "64", 262144),
    ("59.999999", "0.000000001", "0", "0", "1", "0.5", 128),
    ("7", "0.3", "0", "0", "1.000000001", "2", 128),
]


class RuntimeChargeTests(TestCase):
    def test_cost_matches_the_contract_formula_to_the_nano_unit(self) -> None:
        for elapsed, runtime, cpu, memory, multiplier, cores, memory_mb in CASES:
            charge = runtime_charge(
                timedelta(seconds=float(Decimal(elapsed))), to_nanos(Decimal(cores)), memory_mb,
                prices(runtime, cpu, memory, multiplier=multiplier))
            expected = contract_runtime_nanos(Decimal(elapsed), runtime, cpu, memory,
                                              multiplier, cores, memory_mb)
            self.assertEqual(charge.cost_nanos, expected, (elapsed, runtime, cpu, memory))

    def test_one_known_figure(self) -> None:
        # 2 minutes x (0.5 + 0.12 x 0.25 + 0.05 x 0.5) x 1.5 = 1/30 x 0.555 x 1.5 = 0.02775
        charge = runtime_charge(timedelta(seconds=61), to_nanos(Decimal("0.25")), 512,
                                prices("0.5", "0.12", "0.05", multiplier="1.5"))
        self.assertEqual(charge.cost_nanos, 27_750_000)
        self.assertEqual(charge.quantity, "2")
        self.assertEqual(orjson.loads(charge.rate_snapshot), {
            "runtime_price_hour": "0.5", "cpu_price_hour": "0.12",
            "memory_price_gb_hour": "0.05", "runtime_multiplier": "1.5"})

    def test_minutes_round_up_with_a_minimum_of_one(self) -> None:
        self.assertEqual(billable_minutes(timedelta(0)), 1)
        self.assertEqual(billable_minutes(timedelta(seconds=-30)), 1)
        self.assertEqual(billable_minutes(timedelta(microseconds=1)), 1)
        self.assertEqual(billable_minutes(timedelta(seconds=60)), 1)
        self.assertEqual(billable_minutes(timedelta(seconds=60, microseconds=1)), 2)
        self.assertEqual(billable_minutes(timedelta(hours=2)), 120)

    def test_the_multiplier_scales_the_whole_rate(self) -> None:
        base = runtime_charge(timedelta(minutes=30), to_nanos(Decimal(2)), 2048,
                              prices("1", "0.5", "0.25"))
        tripled = runtime_charge(timedelta(minutes=30), to_nanos(Decimal(2)), 2048,
                                 prices("1", "0.5", "0.25", multiplier="3"))
        # 0.5 h x (1 + 1 + 0.5) = 1.25; x3 = 3.75
        self.assertEqual(base.cost_nanos, 1_250_000_000)
        self.assertEqual(tripled.cost_nanos, 3_750_000_000)


class StorageChargeTests(TestCase):
    def test_whole_seconds_over_3600_times_disk_and_price(self) -> None:
        charge = storage_charge(3600, 10, to_nanos(Decimal("0.002")))
        self.assertEqual(charge.cost_nanos, 20_000_000)
        self.assertEqual(charge.quantity, "1")
        self.assertEqual(orjson.loads(charge.rate_snapshot),
                         {"storage_price_gb_hour": "0.002", "disk_gb": "10"})

    def test_odd_intervals_round_once_half_even(self) -> None:
        for seconds, disk, price in [(1, 1, "0.000000001"), (7, 3, "0.1"), (5400, 7, "0.33"),
                                     (86399, 4096, "0.000123457"), (1800, 1, "0.000000001")]:
            with localcontext() as ctx:
                ctx.prec = 60
                expected = (Decimal(seconds) / 3600 * disk * Decimal(price)).quantize(
                    NANO, rounding=ROUND_HALF_EVEN)
            charge = storage_charge(seconds, disk, to_nanos(Decimal(price)))
            self.assertEqual(charge.cost_nanos, int(expected / NANO), (seconds, disk, price))

    def test_quantity_is_hours_as_a_decimal_string(self) -> None:
        self.assertEqual(storage_charge(5400, 1, 1).quantity, "1.5")
        self.assertEqual(storage_charge(1, 1, 1).quantity, "0.000277778")
        self.assertEqual(storage_charge(0, 1, 1).cost_nanos, 0)
