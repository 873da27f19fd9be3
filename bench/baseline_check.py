"""The regression guard of ``bench/run.py --check``: a run's ratios against ``baseline.json``.

Absolute figures on a shared VM move by up to 2x within minutes, so the guard never compares
milliseconds: every figure is Lockgate's against a reference column measured in the same run
(the bare treq proxy, the relay floor, the direct upstream), and a run of K alternating
repeats is summarised by the median of each ratio.  Lower is better for every ratio; a median
more than ``tolerance`` (15 %) above the baseline's is a regression.

The ratios (``ratios_of`` computes them from one run's results):

- ``cpu_vs_treq``: Lockgate's CPU ms per request at c=32 / the treq proxy's;
- ``cpu_vs_floor``: the same / the relay floor's;
- ``p99_c1_overhead_vs_treq``: Lockgate's c=1 p99 above the direct p99 / the treq proxy's
  c=1 p99 above the direct p99;
- ``stream_ttfb_overhead_vs_treq``: Lockgate's stream TTFB p50 above the direct one / the
  treq proxy's above the direct one (N streams sent at once).

Pure functions over JSON-shaped dictionaries, so tests check them on canned results.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

TOLERANCE = 0.15

#: ratio name -> what it is, for the report
RATIOS = {
    "cpu_vs_treq": "CPU/req c=32, Lockgate / treq proxy",
    "cpu_vs_floor": "CPU/req c=32, Lockgate / relay floor",
    "p99_c1_overhead_vs_treq": "c=1 p99 above direct, Lockgate / treq proxy",
    "stream_ttfb_overhead_vs_treq": "stream TTFB p50 above direct, Lockgate / treq proxy",
}


def _figure(run: Mapping[str, Any], target: str, phase: str, key: str) -> float | None:
    column = run.get(target)
    if not isinstance(column, Mapping):
        return None
    values = column.get(phase)
    if not isinstance(values, Mapping):
        return None
    value = values.get(key)
    return float(value) if isinstance(value, int | float) else None


def _ratio(numerator: float | None, denominator: float | None) -> float | None:
    if numerator is None or denominator is None or denominator <= 0:
        return None
    return round(numerator / denominator, 3)


def _over(run: Mapping[str, Any], target: str, phase: str, key: str) -> float | None:
    """``target``'s figure minus the direct column's (the time the proxy adds)."""
    value = _figure(run, target, phase, key)
    direct = _figure(run, "direct", phase, key)
    if value is None or direct is None:
        return None
    return value - direct


def ratios_of(run: Mapping[str, Any]) -> dict[str, float | None]:
    """Every guarded ratio of one run (columns ``direct``, ``floor``, ``treq``, ``gateway``);
    None where a column or phase is missing."""
    gateway_cpu = _figure(run, "gateway", "json_c32", "cpu_ms_per_req")
    return {
        "cpu_vs_treq": _ratio(gateway_cpu, _figure(run, "treq", "json_c32", "cpu_ms_per_req")),
        "cpu_vs_floor": _ratio(gateway_cpu,
                               _figure(run, "floor", "json_c32", "cpu_ms_per_req")),
        "p99_c1_overhead_vs_treq": _ratio(_over(run, "gateway", "json_c1", "p99_ms"),
                                          _over(run, "treq", "json_c1", "p99_ms")),
        "stream_ttfb_overhead_vs_treq": _ratio(_over(run, "gateway", "streams", "ttfb_p50_ms"),
                                               _over(run, "treq", "streams", "ttfb_p50_ms")),
    }


def summarise(per_run: Sequence[Mapping[str, float | None]]) -> dict[str, dict[str, Any]]:
    """Median and min-max of each ratio over the runs that measured it."""
    out: dict[str, dict[str, Any]] = {}
    for name in RATIOS:
        values = [r[name] for r in per_run if r.get(name) is not None]
        measured = [float(v) for v in values if v is not None]
        out[name] = {
            "runs": [r.get(name) for r in per_run],
            "median": round(statistics.median(measured), 3) if measured else None,
            "min": min(measured) if measured else None,
            "max": max(measured) if measured else None,
        }
    return out


@dataclass(frozen=True)
class Verdict:
    """One ratio's comparison with the baseline."""

    name: str
    baseline: float | None
    current: float | None
    limit: float | None
    regressed: bool
    note: str

    def line(self) -> str:
        def fmt(value: float | None) -> str:
            return "-" if value is None else f"{value:.3f}"

        state = "REGRESSED" if self.regressed else "ok"
        return (f"{state:9} {self.name:30} now {fmt(self.current):>7}  baseline "
                f"{fmt(self.baseline):>7}  limit {fmt(self.limit):>7}  {self.note}")


def compare(summary: Mapping[str, Mapping[str, Any]], baseline: Mapping[str, Any],
            tolerance: float | None = None) -> list[Verdict]:
    """Each ratio of ``baseline["ratios"]`` against the run's median.  A ratio the run did
    not measure counts as a regression: a guard that silently skips is no guard."""
    allowed = float(baseline.get("tolerance", TOLERANCE) if tolerance is None else tolerance)
    verdicts = []
    for name, expected in baseline.get("ratios", {}).items():
        current = (summary.get(name) or {}).get("median")
        if expected is None:
            verdicts.append(Verdict(name, None, current, None, False, "no baseline figure"))
            continue
        limit = round(float(expected) * (1 + allowed), 3)
        if current is None:
            verdicts.append(Verdict(name, expected, None, limit, True,
                                    "not measured in this run"))
            continue
        change = (current / expected - 1) * 100 if expected else 0.0
        verdicts.append(Verdict(name, expected, current, limit, current > limit,
                                f"{change:+.1f} % vs baseline"))
    return verdicts


def failed(verdicts: Sequence[Verdict]) -> bool:
    return any(v.regressed for v in verdicts)


def baseline_from(summary: Mapping[str, Mapping[str, Any]], about: Mapping[str, Any]
                  ) -> dict[str, Any]:
    """A new ``baseline.json`` body: the medians of this run, and where they came from."""
    return {**about, "tolerance": TOLERANCE,
            "ratios": {name: figures["median"] for name, figures in summary.items()},
            "spread": {name: [figures["min"], figures["max"]]
                       for name, figures in summary.items()}}
