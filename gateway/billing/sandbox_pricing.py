"""What one sandbox task or one stretch of sandbox storage costs (agents contract §3.6).

Pure arithmetic with a single rounding: prices are integer nano-units per hour, cores are
nano-cores, and every intermediate value is an exact ``Fraction``; only the final cost is
rounded (half-even) to a whole nano-unit.  That is the contract's ``hours x rate`` computed
without the intermediate rounding a 28-digit ``Decimal`` would do on ``minutes / 60``.

Runtime: ``minutes = ceil(elapsed / 60 s)``, at least 1 (a negative elapsed counts as 0);
``rate = (runtime + cpu x cores + memory x memory_mb / 1024) x multiplier`` per hour.
Storage: ``hours = whole seconds / 3600``; ``cost = hours x disk_gb x storage price``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import timedelta
from decimal import ROUND_HALF_EVEN, Decimal
from fractions import Fraction

import orjson

from gateway.billing.money import format_decimal, format_nanos

NANOS = 1_000_000_000
#: storage quantities (hours) are shown with at most this many decimal places
QUANTITY_PLACES = Decimal("0.000000001")


@dataclass(frozen=True)
class HostPrices:
    """A host's rates as stored (nano-units per hour; the multiplier in nano-units of 1)."""

    runtime_price_hour_nanos: int
    cpu_price_hour_nanos: int
    memory_price_gb_hour_nanos: int
    storage_price_gb_hour_nanos: int
    runtime_multiplier_nanos: int


@dataclass(frozen=True)
class Charge:
    """One computed charge: its quantity (as text), exact cost and the rates it used."""

    quantity: str
    cost_nanos: int
    rate_snapshot: str


def billable_minutes(elapsed: timedelta) -> int:
    """Whole minutes started, at least one (a clock that went backwards counts as zero)."""
    micros = max(0, elapsed // timedelta(microseconds=1))
    return max(1, math.ceil(Fraction(micros, 60_000_000)))


def runtime_charge(elapsed: timedelta, cpu_cores_nanos: int, memory_mb: int,
                   prices: HostPrices) -> Charge:
    minutes = billable_minutes(elapsed)
    rate = (Fraction(prices.runtime_price_hour_nanos)
            + Fraction(prices.cpu_price_hour_nanos * cpu_cores_nanos, NANOS)
            + Fraction(prices.memory_price_gb_hour_nanos * memory_mb, 1024)) \
        * Fraction(prices.runtime_multiplier_nanos, NANOS)
    snapshot = {
        "runtime_price_hour": format_nanos(prices.runtime_price_hour_nanos),
        "cpu_price_hour": format_nanos(prices.cpu_price_hour_nanos),
        "memory_price_gb_hour": format_nanos(prices.memory_price_gb_hour_nanos),
        "runtime_multiplier": format_nanos(prices.runtime_multiplier_nanos),
    }
    return Charge(quantity=str(minutes), cost_nanos=round(rate * minutes / 60),
                  rate_snapshot=orjson.dumps(snapshot).decode())


def storage_charge(seconds: int, disk_gb: int, storage_price_gb_hour_nanos: int) -> Charge:
    """Storage for ``seconds`` whole seconds (callers skip a charge whose cost is not > 0)."""
    hours = Fraction(max(0, seconds), 3600)
    cost = round(hours * disk_gb * storage_price_gb_hour_nanos)
    shown = (Decimal(hours.numerator) / Decimal(hours.denominator)).quantize(
        QUANTITY_PLACES, rounding=ROUND_HALF_EVEN)
    snapshot = {"storage_price_gb_hour": format_nanos(storage_price_gb_hour_nanos),
                "disk_gb": str(disk_gb)}
    return Charge(quantity=format_decimal(shown), cost_nanos=cost,
                  rate_snapshot=orjson.dumps(snapshot).decode())
