"""Code A/B of assistant runs: CPU per round at one commit against this checkout, alternating.

The machine's CPU speed moves by up to 2x within minutes and other work shares it, so a cut
in a run's CPU is measured against the code before it *in the same command*: one upstream, two
``twistd -n lockgate`` processes (A: ``--before``'s tree from ``git archive``, B: this
checkout), both with every thread pinned to CPU 0 like ``bench/code_ab.py``, this client on the
other CPUs.  Phases alternate A B B A A B ... so that drift hits both sides; each phase is, on
one side, ``assistant_runs.py``'s concurrent phase (``--runs`` runs of ``--rounds`` rounds,
instant upstream), the same with one-round runs (so the *marginal* round: what one more round
costs, start and finish cancelled out) and, with ``--latency``, the concurrent phase with that
model latency (its per-round overhead p50/p99 and the core's utilisation).  Prints every phase,
the medians per side and B/A of the medians, and B/A per adjacent pair (min-max).

    .venv/bin/python bench/assistant_code_ab.py --before HEAD~1 [--pairs 3] [--runs 200]
                                                [--rounds 5] [--latency 1.0]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from bench.assistant_runs import (  # noqa: E402
    concurrent_phase,
    latency_model,
    login,
    marginal,
    start_lockgate,
    upstream_ms,
)
from bench.code_ab import export  # noqa: E402
from bench.provision import provision  # noqa: E402
from bench.run import free_port, wait_http  # noqa: E402

ROOT = HERE.parent
MODEL, ONE_ROUND = "bench-assistant", "bench-assistant-1"
#: the figures compared, as paths into one phase's result
FIGURES = {
    "cpu_ms_per_round": ("concurrent", "per_round", "cpu_ms"),
    "reactor_thread_cpu_ms_per_round": ("concurrent", "per_round", "reactor_thread_cpu_ms"),
    "cpu_ms_per_one_round_run": ("one_round", "per_round", "cpu_ms"),
    "marginal_round_cpu_ms": ("marginal_round", "cpu_ms"),
    "db_transactions_per_round": ("concurrent", "per_round", "db_transactions"),
    "saturated_overhead_p50_ms": ("concurrent", "overhead_p50_ms"),
    "saturated_span_ms_per_round": ("concurrent", "span_ms_per_round"),
    "latency_overhead_p50_ms": ("latency", "overhead_p50_ms"),
    "latency_overhead_p99_ms": ("latency", "overhead_p99_ms"),
    "latency_cpu_ms_per_round": ("latency", "per_round", "cpu_ms"),
    "latency_core_utilisation": ("latency", "core_utilisation"),
}


class Side:
    """One gateway of the A/B, provisioned and logged in."""

    def __init__(self, name: str, tmp: Path, source: Path | None, up_port: int,
                 args: argparse.Namespace) -> None:
        self.name = name
        tmp.mkdir(parents=True)
        self.port, self.metrics_port = free_port(), free_port()
        while self.metrics_port == self.port:
            self.metrics_port = free_port()
        self.process = start_lockgate(tmp, self.port, self.metrics_port, None, source=source,
                                      cpu=0)
        if not wait_http(self.port, "/healthz", 30):
            raise SystemExit(f"gateway {name} did not start; see {tmp}")
        models = {MODEL: f"bench+rounds-{args.rounds}", ONE_ROUND: "bench+rounds-1"}
        if args.latency:
            ms = round(args.latency * 1000)
            models[latency_model(args.latency)] = (
                f"bench+rounds-{args.rounds}+latency-{ms}+jitter-{round(ms * args.jitter)}")
        provision("127.0.0.1", self.port, f"http://127.0.0.1:{up_port}", models)
        self.token = login(self.port)

    def phase(self, args: argparse.Namespace, direct: float, runs: int | None = None
              ) -> dict[str, Any]:
        runs = runs or args.runs
        pid = self.process.pid
        many = concurrent_phase(self.port, self.metrics_port, pid, self.token, MODEL, runs,
                                args.rounds, direct)
        one = concurrent_phase(self.port, self.metrics_port, pid, self.token, ONE_ROUND, runs,
                               1, direct)
        result = {"concurrent": many, "one_round": one,
                  "marginal_round": marginal(one, many, args.rounds)}
        if args.latency:
            result["latency"] = concurrent_phase(
                self.port, self.metrics_port, pid, self.token, latency_model(args.latency),
                runs, args.rounds, direct, args.latency, args.jitter)
        return result


def figure(result: dict[str, Any], path: tuple[str, ...]) -> float | None:
    value: Any = result
    for key in path:
        if not isinstance(value, dict) or key not in value:
            return None
        value = value[key]
    return None if value is None else float(value)


def summary(phases: list[tuple[str, dict[str, Any]]], names: list[str]) -> dict[str, Any]:
    """Per figure: each side's median, B/A of the medians, and B/A per adjacent A-B pair."""
    out: dict[str, Any] = {}
    a_name, b_name = names
    for key, path in FIGURES.items():
        by_side = {name: [v for side, result in phases if side == name
                          for v in [figure(result, path)] if v is not None] for name in names}
        if not all(by_side.values()):
            continue
        a, b = statistics.median(by_side[a_name]), statistics.median(by_side[b_name])
        pairs = []
        for first, second in zip(phases[::2], phases[1::2], strict=False):
            values = {first[0]: figure(first[1], path), second[0]: figure(second[1], path)}
            a_value, b_value = values.get(a_name), values.get(b_name)
            if a_value and b_value is not None:
                pairs.append(b_value / a_value)
        out[key] = {"A_median": round(a, 3), "B_median": round(b, 3),
                    "B_over_A": round(b / a, 3) if a else None,
                    "pair_B_over_A_min_max": [round(min(pairs), 3), round(max(pairs), 3)]
                    if pairs else None}
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", required=True, help="the A side's git revision")
    parser.add_argument("--pairs", type=int, default=3, help="A/B pairs (phases: 2 x pairs)")
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--latency", type=float, default=1.0,
                        help="model latency (s) of the latency phase; 0: none")
    parser.add_argument("--jitter", type=float, default=0.5,
                        help="the latency phase's holds spread over latency x (1 +/- this)")
    args = parser.parse_args(argv)
    if (os.cpu_count() or 1) > 1:
        os.sched_setaffinity(0, set(range(1, os.cpu_count() or 2)))
    tmp = Path(tempfile.mkdtemp(prefix="lockgate-assistant-ab-"))
    before_tree = tmp / "before-tree"
    before_tree.mkdir()
    commit = export(args.before, before_tree)
    up_port = free_port()
    upstream = subprocess.Popen([sys.executable, str(HERE / "upstream.py"),  # noqa: S603
                                 "--port", str(up_port)], stdout=subprocess.DEVNULL)
    sides: list[Side] = []
    try:
        if not wait_http(up_port, "/v1/models", 15):
            raise SystemExit("bench upstream did not start")
        for name, source in ((f"A {commit}", before_tree), ("B this checkout", None)):
            sides.append(Side(name, tmp / name.split()[0], source, up_port, args))
        direct = upstream_ms(up_port, args.rounds)
        for side in sides:  # warm-up: caches, the default agent, JIT-free but page-warm
            side.phase(args, direct, runs=20)
        phases: list[tuple[str, dict[str, Any]]] = []
        for index in range(2 * args.pairs):
            order = sides if (index // 2) % 2 == 0 else sides[::-1]
            side = order[index % 2]
            result = side.phase(args, direct)
            phases.append((side.name, result))
            print(json.dumps({"phase": index + 1, "side": side.name, **{
                key: figure(result, path) for key, path in FIGURES.items()}}),
                file=sys.stderr, flush=True)
        print(json.dumps({
            "before": commit, "runs": args.runs, "rounds": args.rounds,
            "model_latency_s": args.latency, "model_jitter": args.jitter,
            "upstream_direct_p50_ms": round(direct, 3),
            "summary": summary(phases, [side.name for side in sides]),
            "phases": [{"side": name, **{key: figure(result, path)
                                         for key, path in FIGURES.items()}}
                       for name, result in phases],
            "load_average": os.getloadavg()}, indent=2))
    finally:
        for side in sides:
            side.process.terminate()
            side.process.wait(30)
        upstream.terminate()
        upstream.wait(30)


if __name__ == "__main__":
    main()
