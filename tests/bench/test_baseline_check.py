"""``bench/run.py --check``'s comparison logic, on canned results (no timing is measured).

The guard compares ratios against reference columns of the same run with a committed
baseline; these tests pin down which figures make each ratio, that the median of alternating
runs is what is compared, that a rise past the tolerance fails and one within it passes, and
that a ratio the run did not measure fails rather than being skipped.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

from twisted.trial import unittest

_BENCH = Path(__file__).resolve().parents[2] / "bench"
_spec = importlib.util.spec_from_file_location("bench_baseline_check",
                                               _BENCH / "baseline_check.py")
assert _spec is not None and _spec.loader is not None
baseline_check = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = baseline_check  # dataclasses look their module up there
_spec.loader.exec_module(baseline_check)


def column(cpu_c32: float, p99_c1: float, ttfb_p50: float | None) -> dict:
    out = {"json_c1": {"p99_ms": p99_c1, "cpu_ms_per_req": 0.1},
           "json_c32": {"cpu_ms_per_req": cpu_c32, "p99_ms": 9.0}}
    if ttfb_p50 is not None:
        out["streams"] = {"ttfb_p50_ms": ttfb_p50}
    return out


def run(gateway_cpu: float = 0.6, treq_cpu: float = 0.5, floor_cpu: float = 0.3,
        gateway_p99: float = 2.04, treq_p99: float = 1.04,
        gateway_ttfb: float | None = 110.0, treq_ttfb: float | None = 210.0) -> dict:
    return {"direct": column(0.01, 0.04, 10.0),
            "floor": column(floor_cpu, 0.5, 150.0),
            "treq": column(treq_cpu, treq_p99, treq_ttfb),
            "gateway": column(gateway_cpu, gateway_p99, gateway_ttfb)}


BASELINE = {"tolerance": 0.15, "ratios": {
    "cpu_vs_treq": 1.2, "cpu_vs_floor": 2.0, "p99_c1_overhead_vs_treq": 2.0,
    "stream_ttfb_overhead_vs_treq": 0.5}}


class RatiosTests(unittest.TestCase):
    def test_each_ratio_is_lockgate_over_its_reference_column(self) -> None:
        ratios = baseline_check.ratios_of(run())
        self.assertEqual(ratios, {
            "cpu_vs_treq": 1.2,  # 0.6 / 0.5
            "cpu_vs_floor": 2.0,  # 0.6 / 0.3
            "p99_c1_overhead_vs_treq": 2.0,  # (2.04 - 0.04) / (1.04 - 0.04)
            "stream_ttfb_overhead_vs_treq": 0.5,  # (110 - 10) / (210 - 10)
        })

    def test_a_missing_column_or_phase_gives_no_ratio(self) -> None:
        results = run(gateway_ttfb=None)
        del results["treq"]
        ratios = baseline_check.ratios_of(results)
        self.assertIsNone(ratios["cpu_vs_treq"])
        self.assertIsNone(ratios["stream_ttfb_overhead_vs_treq"])
        self.assertEqual(ratios["cpu_vs_floor"], 2.0)

    def test_summary_is_the_median_and_the_spread_of_the_runs(self) -> None:
        per_run = [baseline_check.ratios_of(run(gateway_cpu=cpu)) for cpu in (0.6, 0.9, 0.55)]
        summary = baseline_check.summarise(per_run)
        self.assertEqual(summary["cpu_vs_treq"],
                         {"runs": [1.2, 1.8, 1.1], "median": 1.2, "min": 1.1, "max": 1.8})


class CompareTests(unittest.TestCase):
    def check(self, *runs: dict) -> list:
        summary = baseline_check.summarise([baseline_check.ratios_of(r) for r in runs])
        return baseline_check.compare(summary, json.loads(json.dumps(BASELINE)))

    def test_the_baseline_itself_passes(self) -> None:
        verdicts = self.check(run())
        self.assertFalse(baseline_check.failed(verdicts))
        self.assertEqual([v.name for v in verdicts], list(BASELINE["ratios"]))

    def test_a_rise_within_the_tolerance_passes(self) -> None:
        # Lockgate 14 % dearer than in the baseline, relative to the treq proxy
        self.assertFalse(baseline_check.failed(self.check(run(gateway_cpu=0.684))))

    def test_a_rise_past_the_tolerance_fails_naming_the_ratio(self) -> None:
        verdicts = self.check(run(gateway_cpu=0.72, floor_cpu=0.36, treq_cpu=0.5))
        regressed = [v.name for v in verdicts if v.regressed]
        self.assertEqual(regressed, ["cpu_vs_treq"])  # 1.44 > 1.2 * 1.15 = 1.38; the floor ratio held
        self.assertIn("REGRESSED", next(v for v in verdicts if v.regressed).line())

    def test_absolute_slowness_alone_is_no_regression(self) -> None:
        # a machine twice as slow doubles every column: the ratios do not move
        slow = run(gateway_cpu=1.2, treq_cpu=1.0, floor_cpu=0.6)
        self.assertFalse(baseline_check.failed(self.check(slow)))

    def test_the_median_of_runs_is_compared_not_the_worst_run(self) -> None:
        verdicts = self.check(run(), run(gateway_cpu=0.9), run())
        self.assertFalse(baseline_check.failed(verdicts))
        verdicts = self.check(run(gateway_cpu=0.9), run(gateway_cpu=0.8), run())
        self.assertTrue(baseline_check.failed(verdicts))

    def test_a_ratio_not_measured_fails(self) -> None:
        verdicts = self.check(run(gateway_ttfb=None))
        missing = next(v for v in verdicts if v.name == "stream_ttfb_overhead_vs_treq")
        self.assertTrue(missing.regressed)
        self.assertIn("not measured", missing.note)

    def test_the_tolerance_can_be_given(self) -> None:
        summary = baseline_check.summarise([baseline_check.ratios_of(run(gateway_cpu=0.684))])
        self.assertTrue(baseline_check.failed(baseline_check.compare(summary, BASELINE, 0.10)))

    def test_a_written_baseline_passes_its_own_run(self) -> None:
        summary = baseline_check.summarise([baseline_check.ratios_of(run())])
        written = baseline_check.baseline_from(summary, {"commit": "abc"})
        self.assertEqual(written["ratios"], BASELINE["ratios"])
        self.assertEqual(written["commit"], "abc")
        self.assertFalse(baseline_check.failed(baseline_check.compare(summary, written)))
