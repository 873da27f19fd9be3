"""The figures of ``bench/run.py --interleave K``: many short phases, columns alternating.

Why: this VM's CPU speed moves by up to 2x within minutes, so a ratio of two columns each
measured for 5 s, half a minute apart, swings (Lockgate / treq 0.66-1.17 within one command).
Interleaved, every column runs K short phases in turn on the same warm processes (direct,
floor, treq, Lockgate, direct, floor, ...): one *round* is one phase of each column, seconds
apart, so each round's ratios compare columns measured at nearly the same machine speed.
The run reports the median and the min-max of the per-round ratios; for the c=1 latency it
also pools every round's samples per column (a p99 over K times more samples) and gives each
round's p99 above the direct column's.

A round has the shape of one ``run.py`` run (``{column: {"json_c1": {...}, "json_c32":
{...}}}``), so ``baseline_check.ratios_of`` computes its ratios and ``--check`` compares the
median of the rounds with ``baseline.json`` as before.  Pure functions over JSON-shaped
dictionaries and sample lists, so tests check them on canned phases.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from typing import Any

import baseline_check
from load import percentile

#: the measured columns whose c=1 p99 is compared with the direct column's
PROXIES = ("floor", "treq", "gateway")


def phase_figures(latencies: Sequence[float], requests: int, seconds: float,
                  cpu_seconds: float | None, errors: int) -> dict[str, Any]:
    """One phase's figures in ``run.py``'s shape (times in ms)."""
    cpu_ms = None if cpu_seconds is None or not requests else cpu_seconds * 1000 / requests
    return {"requests": requests, "errors": errors,
            "req_per_s": round(requests / seconds, 1) if seconds else 0.0,
            "cpu_ms_per_req": None if cpu_ms is None else round(cpu_ms, 3),
            "p50_ms": _ms(percentile(list(latencies), 50)),
            "p99_ms": _ms(percentile(list(latencies), 99))}


def _ms(value: float | None) -> float | None:
    return None if value is None else round(value * 1000, 3)


def pooled(samples: Mapping[str, Sequence[float]]) -> dict[str, dict[str, Any]]:
    """Per column: p50 and p99 (ms) of every round's c=1 samples together."""
    return {column: {"samples": len(values), "p50_ms": _ms(percentile(list(values), 50)),
                     "p99_ms": _ms(percentile(list(values), 99))}
            for column, values in samples.items()}


def _spread(values: Sequence[float | None]) -> dict[str, Any]:
    measured = [float(v) for v in values if v is not None]
    return {"rounds": list(values),
            "median": round(statistics.median(measured), 3) if measured else None,
            "min": round(min(measured), 3) if measured else None,
            "max": round(max(measured), 3) if measured else None}


def p99_over_direct(rounds: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per proxy column: each round's c=1 p99 minus the direct column's in the same round
    (ms), with the median and min-max; and Lockgate's minus the relay floor's."""
    def p99(round_: Mapping[str, Any], column: str) -> float | None:
        value = ((round_.get(column) or {}).get("json_c1") or {}).get("p99_ms")
        return float(value) if isinstance(value, int | float) else None

    def minus(a: float | None, b: float | None) -> float | None:
        return None if a is None or b is None else round(a - b, 3)

    out = {column: _spread([minus(p99(r, column), p99(r, "direct")) for r in rounds])
           for column in PROXIES}
    out["gateway_over_floor"] = _spread([minus(p99(r, "gateway"), p99(r, "floor"))
                                         for r in rounds])
    return out


def summary(rounds: Sequence[Mapping[str, Any]], samples: Mapping[str, Sequence[float]],
            extra_runs: Sequence[Mapping[str, Any]] = ()) -> dict[str, Any]:
    """Everything the interleaved run reports.  ``extra_runs``: runs of the phases that are
    not interleaved (the N streams at once), whose ratios join the guard's summary."""
    per_round = [baseline_check.ratios_of(r) for r in rounds]
    guarded = baseline_check.summarise([*per_round,
                                        *(baseline_check.ratios_of(r) for r in extra_runs)])
    pool = pooled(samples)
    direct = (pool.get("direct") or {}).get("p99_ms")
    return {
        "rounds": len(rounds),
        "ratios": guarded,
        "p99_c1_over_direct_per_round_ms": p99_over_direct(rounds),
        "pooled_c1": pool,
        "pooled_p99_c1_over_direct_ms": {
            column: (None if direct is None or figures["p99_ms"] is None
                     else round(figures["p99_ms"] - direct, 3))
            for column, figures in pool.items() if column != "direct"},
    }


def report(result: Mapping[str, Any]) -> str:
    """The interleaved run's summary as text."""
    lines = [f"interleaved: {result['rounds']} rounds, columns alternating each round"]
    lines.append(f"{'ratio (per round)':52} {'median':>8} {'min-max':>15}")
    for name, figures in result["ratios"].items():
        if figures["median"] is None:
            continue
        lines.append(f"{baseline_check.RATIOS[name]:52} {figures['median']:8.3f} "
                     f"{figures['min']:7.3f}-{figures['max']:.3f}")
    lines.append(f"{'c=1 p99 above direct, ms (per round)':52} {'median':>8} {'min-max':>15}")
    for column, figures in result["p99_c1_over_direct_per_round_ms"].items():
        if figures["median"] is None:
            continue
        lines.append(f"  {column:50} {figures['median']:8.3f} "
                     f"{figures['min']:7.3f}-{figures['max']:.3f}")
    lines.append("c=1 pooled over all rounds (ms): " + ", ".join(
        f"{column} p50 {f['p50_ms']} p99 {f['p99_ms']} (n={f['samples']})"
        for column, f in result["pooled_c1"].items()))
    lines.append("pooled c=1 p99 above direct (ms): " + ", ".join(
        f"{column} {value}" for column, value in result["pooled_p99_c1_over_direct_ms"].items()))
    return "\n".join(lines)
