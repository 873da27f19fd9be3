"""``bench/run.py --interleave K``'s figures, on canned phases (no timing is measured).

The interleaved run compares columns measured seconds apart, round by round: these tests pin
down that each round's ratios come from that round's phases only, that the median and min-max
are over rounds, that the c=1 samples are pooled per column, that the per-round p99 figures
are each column's minus the direct column's of the same round, and that the result still
feeds ``--check`` (the N-streams ratio, measured once, joins the rounds' ratios).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

from twisted.trial import unittest

_BENCH = Path(__file__).resolve().parents[2] / "bench"


def _load(name: str):  # type: ignore[no-untyped-def]
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, _BENCH / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


_load("baseline_check")
_load("load")
interleave = _load("interleave")
baseline_check = sys.modules["baseline_check"]


def phases(cpu32: float, p99_c1: float) -> dict:
    return {"json_c32": {"cpu_ms_per_req": cpu32}, "json_c1": {"p99_ms": p99_c1}}


def a_round(gateway_cpu: float, treq_cpu: float, floor_cpu: float = 0.3,
            gateway_p99: float = 2.0, treq_p99: float = 1.5, floor_p99: float = 1.2,
            direct_p99: float = 1.0) -> dict:
    return {"direct": phases(0.01, direct_p99), "floor": phases(floor_cpu, floor_p99),
            "treq": phases(treq_cpu, treq_p99), "gateway": phases(gateway_cpu, gateway_p99)}


def samples(n: int, base: float, tail: float) -> list[float]:
    """``n`` latencies (s): all ``base`` but the slowest 2 % at ``tail``."""
    slow = max(1, n // 50)
    return [base] * (n - slow) + [tail] * slow


class PhaseFiguresTests(unittest.TestCase):
    def test_cpu_per_request_rate_and_percentiles_in_ms(self) -> None:
        figures = interleave.phase_figures([0.001] * 98 + [0.005] * 2, 100, 2.0, 0.05, 0)
        self.assertEqual(figures["cpu_ms_per_req"], 0.5)  # 50 ms of CPU / 100 requests
        self.assertEqual(figures["req_per_s"], 50.0)
        self.assertEqual(figures["p50_ms"], 1.0)
        self.assertEqual(figures["p99_ms"], 5.0)

    def test_no_requests_gives_no_cpu_figure(self) -> None:
        figures = interleave.phase_figures([], 0, 2.0, 0.05, 3)
        self.assertIsNone(figures["cpu_ms_per_req"])
        self.assertIsNone(figures["p99_ms"])
        self.assertEqual(figures["errors"], 3)


class SummaryTests(unittest.TestCase):
    def test_ratios_are_per_round_with_median_and_spread(self) -> None:
        # the machine's speed doubles in round 2: every column doubles, the ratio holds
        rounds = [a_round(0.6, 0.5), a_round(1.2, 1.0), a_round(0.45, 0.5)]
        result = interleave.summary(rounds, {})
        cpu = result["ratios"]["cpu_vs_treq"]
        self.assertEqual(cpu["runs"], [1.2, 1.2, 0.9])
        self.assertEqual((cpu["median"], cpu["min"], cpu["max"]), (1.2, 0.9, 1.2))
        self.assertEqual(result["rounds"], 3)

    def test_a_columns_slow_phase_shows_only_in_its_own_round(self) -> None:
        # had the columns been measured a round apart, the ratio would be 0.6 / 1.0 or 1.2 / 0.5
        rounds = [a_round(0.6, 0.5), a_round(1.2, 1.0)]
        self.assertEqual(interleave.summary(rounds, {})["ratios"]["cpu_vs_floor"]["runs"],
                         [2.0, 4.0])

    def test_p99_above_direct_per_round(self) -> None:
        rounds = [a_round(0.6, 0.5, gateway_p99=3.0, direct_p99=1.0, floor_p99=1.5),
                  a_round(0.6, 0.5, gateway_p99=6.0, direct_p99=5.0, floor_p99=5.5),
                  a_round(0.6, 0.5, gateway_p99=2.5, direct_p99=1.0, floor_p99=2.0)]
        over = interleave.summary(rounds, {})["p99_c1_over_direct_per_round_ms"]
        self.assertEqual(over["gateway"]["rounds"], [2.0, 1.0, 1.5])
        self.assertEqual((over["gateway"]["median"], over["gateway"]["min"],
                          over["gateway"]["max"]), (1.5, 1.0, 2.0))
        self.assertEqual(over["gateway_over_floor"]["rounds"], [1.5, 0.5, 0.5])

    def test_c1_samples_are_pooled_per_column(self) -> None:
        pooled = {"direct": samples(1000, 0.001, 0.002),
                  # one round with no tail, one with 4 % of its samples at 9 ms
                  "gateway": [0.002] * 500 + [0.002] * 480 + [0.009] * 20}
        result = interleave.summary([], pooled)
        self.assertEqual(result["pooled_c1"]["gateway"],
                         {"samples": 1000, "p50_ms": 2.0, "p99_ms": 9.0})
        self.assertEqual(result["pooled_p99_c1_over_direct_ms"], {"gateway": 7.0})

    def test_the_streams_ratio_measured_once_joins_the_guarded_summary(self) -> None:
        rounds = [a_round(0.6, 0.5), a_round(0.6, 0.5)]
        streams = {"direct": {"streams": {"ttfb_p50_ms": 10.0}},
                   "treq": {"streams": {"ttfb_p50_ms": 210.0}},
                   "gateway": {"streams": {"ttfb_p50_ms": 110.0}}}
        result = interleave.summary(rounds, {}, [streams])
        self.assertEqual(result["ratios"]["stream_ttfb_overhead_vs_treq"]["median"], 0.5)
        # the streams run adds no CPU or p99 figure: those stay the rounds' medians
        self.assertEqual(result["ratios"]["cpu_vs_treq"]["median"], 1.2)
        self.assertEqual(result["ratios"]["p99_c1_overhead_vs_treq"]["median"], 2.0)

    def test_the_summary_feeds_the_regression_check(self) -> None:
        baseline = {"tolerance": 0.15, "ratios": {"cpu_vs_treq": 1.0, "cpu_vs_floor": 2.0}}
        steady = interleave.summary([a_round(0.5, 0.5, 0.25)] * 3, {})
        self.assertFalse(baseline_check.failed(baseline_check.compare(steady["ratios"],
                                                                      baseline)))
        slower = interleave.summary([a_round(0.6, 0.5, 0.25)] * 3, {})
        regressed = [v.name for v in baseline_check.compare(slower["ratios"], baseline)
                     if v.regressed]
        self.assertEqual(regressed, ["cpu_vs_treq", "cpu_vs_floor"])

    def test_report_names_every_figure(self) -> None:
        rounds = [a_round(0.6, 0.5), a_round(0.7, 0.5)]
        text = interleave.report(interleave.summary(
            rounds, {"direct": [0.001] * 10, "gateway": [0.002] * 10}))
        self.assertIn("2 rounds", text)
        self.assertIn("CPU/req c=32, Lockgate / treq proxy", text)
        self.assertIn("1.200-1.400", text)
        self.assertIn("gateway_over_floor", text)
        self.assertIn("gateway 1.0", text)
