"""Assistant runs before/after a change, alternating in one command (``assistant_runs.py``).

This VM's CPU speed moves by up to 2x within minutes and other processes share its cores, so a
change to the run path is measured against the code before it *in the same command*: the
``--before`` commit is exported with ``git archive`` and ``assistant_runs.py`` runs alternately
against it (its tree first on ``PYTHONPATH``, which the gateway process inherits) and against
this checkout, in the order A B B A A B ... so that drift hits both sides.  Each run starts its
own upstream and gateway on a fresh SQLite file.  Prints every run's key figures, then per
figure the min-max of each side and of the after/before ratio of each adjacent pair::

    .venv/bin/python bench/assistant_runs_ab.py --before HEAD~3 --pairs 2 -- \\
        --runs 200 --rounds 5 --serial-runs 5 --tails 20
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from code_ab import export  # noqa: E402

#: figure name -> path in ``assistant_runs.py``'s first repeat
FIGURES = {
    "concurrent_overhead_p50_ms": ("concurrent", "overhead_p50_ms"),
    "concurrent_overhead_p99_ms": ("concurrent", "overhead_p99_ms"),
    "concurrent_wall_s": ("concurrent", "wall_s"),
    "concurrent_rounds_in_flight_mean": ("concurrent", "rounds_in_flight_mean"),
    "concurrent_span_ms_per_round": ("concurrent", "span_ms_per_round"),
    "serial_overhead_p50_ms": ("one_at_a_time", "overhead_p50_ms"),
    "cpu_ms_per_round": ("concurrent", "per_round", "cpu_ms"),
    "reactor_cpu_ms_per_round": ("concurrent", "per_round", "reactor_thread_cpu_ms"),
    "db_transactions_per_round": ("concurrent", "per_round", "db_transactions"),
    "cpu_ms_per_one_round_run": ("concurrent_one_round", "per_round", "cpu_ms"),
    "db_transactions_per_one_round_run": ("concurrent_one_round", "per_round",
                                          "db_transactions"),
    "marginal_round_cpu_ms": ("marginal_round", "cpu_ms"),
    "cpu_ms_per_v1_call": ("reference_v1", "per_call", "cpu_ms"),
    "round_cpu_over_v1_call_cpu": ("round_cpu_over_v1_call_cpu",),
}


def figures(result: dict[str, Any]) -> dict[str, float | None]:
    out: dict[str, float | None] = {}
    for name, path in FIGURES.items():
        value: Any = result["repeats"][0]
        for key in path:
            value = value.get(key) if isinstance(value, dict) else None
        out[name] = value
    out["upstream_direct_p50_ms"] = result["upstream_direct_p50_ms"]
    return out


def one_run(source: Path | None, bench_args: list[str]) -> dict[str, float | None]:
    env = dict(os.environ)
    if source is not None:
        env["PYTHONPATH"] = str(source)
    else:
        env.pop("PYTHONPATH", None)
    done = subprocess.run([sys.executable, str(HERE / "assistant_runs.py"),  # noqa: S603
                           "--repeat", "1", *bench_args], env=env, capture_output=True,
                          text=True, check=True)
    return figures(json.loads(done.stdout))


def spread(values: list[float | None]) -> list[float] | None:
    known = [v for v in values if v is not None]
    return [min(known), max(known)] if known else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", required=True, help="the commit to compare against")
    parser.add_argument("--pairs", type=int, default=2)
    parser.add_argument("bench_args", nargs="*", help="after --: assistant_runs.py options")
    args = parser.parse_args()
    tree = Path(tempfile.mkdtemp(prefix="lockgate-assistant-ab-"))
    commit = export(args.before, tree)
    runs: dict[str, list[dict[str, float | None]]] = {"before": [], "after": []}
    for pair in range(args.pairs):
        order = ("before", "after") if pair % 2 == 0 else ("after", "before")
        for side in order:
            result = one_run(tree if side == "before" else None, args.bench_args)
            runs[side].append(result)
            print(json.dumps({"pair": pair + 1, "side": side, **result}), flush=True)
    summary: dict[str, Any] = {"before_commit": commit, "load_average": os.getloadavg()}
    for name in [*FIGURES, "upstream_direct_p50_ms"]:
        before = [r[name] for r in runs["before"]]
        after = [r[name] for r in runs["after"]]
        ratios = [a / b for a, b in zip(after, before, strict=True)
                  if a is not None and b is not None and b != 0]
        summary[name] = {"before": spread(before), "after": spread(after),
                         "after_over_before": spread([round(r, 3) for r in ratios])}
    print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
