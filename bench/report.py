"""The printed side of ``bench/run.py``: one table per run, and the ratios with their spread."""

from __future__ import annotations

from typing import Any

import baseline_check

TARGETS = (("direct", "direct"), ("floor", "relay floor"), ("treq", "treq proxy"),
           ("gateway", "lockgate"), ("before", "lockgate before"))
def table(run: dict[str, Any], streams: int) -> str:
    rows = [("figure", *(label for _, label in TARGETS))]

    def row(label: str, *keys: str) -> None:
        cells = []
        for name, _ in TARGETS:
            value: Any = run.get(name) or {}
            for key in keys:
                value = value.get(key) if isinstance(value, dict) else None
            cells.append("-" if value is None else str(value))
        rows.append((label, *cells))

    for c in (1, 32):
        for key, label in (("req_per_s", "req/s"), ("p50_ms", "p50 ms"), ("p99_ms", "p99 ms"),
                           ("cpu_ms_per_req", "CPU ms/req"),
                           ("req_per_cpu_s", "req per CPU-second"), ("errors", "errors")):
            row(f"non-stream c={c} {label}", f"json_c{c}", key)
    for key, label in (("completed", "completed"), ("ttfb_p50_ms", "TTFB p50 ms"),
                       ("ttfb_p99_ms", "TTFB p99 ms"), ("done_p50_ms", "done p50 ms"),
                       ("done_p99_ms", "done p99 ms"),
                       ("cpu_ms_per_stream", "CPU ms/stream"),
                       ("max_gap_p50_ms", "max chunk gap p50 ms"),
                       ("max_gap_p99_ms", "max chunk gap p99 ms"),
                       ("chunks_per_stream", "HTTP chunks per stream"),
                       ("running_max_gap_p50_ms", "running streams' max gap p50 ms"),
                       ("running_max_gap_p99_ms", "running streams' max gap p99 ms"),
                       ("errors", "errors")):
        row(f"{streams} streams {label}", "streams", key)
    for key, label in (("open_at_peak", "open"), ("rss_per_stream_kib", "RSS KiB/stream"),
                       ("rss_peak_kib", "RSS peak KiB"),
                       ("upstream_fds_after_hangup", "upstream fds after hang-up"),
                       ("upstream_closed_after_s", "upstream closed after s")):
        row(f"slow streams {label}", "slow_streams", key)
    return align(rows)


def align(rows: list[tuple[str, ...]]) -> str:
    width = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(width[i]) for i, cell in enumerate(r)) for r in rows]
    lines.insert(1, "  ".join("-" * w for w in width))
    return "\n".join(lines)


def ratio_table(summary: dict[str, dict[str, Any]]) -> str:
    """One row per guarded ratio: each run, the median and the spread (min-max)."""
    runs = max((len(f["runs"]) for f in summary.values()), default=0)
    rows = [("ratio (lower is better)", *(f"run {i + 1}" for i in range(runs)), "median",
             "min-max")]
    for name, figures in summary.items():
        cells = ["-" if v is None else f"{v:.3f}" for v in figures["runs"]]
        spread = ("-" if figures["min"] is None
                  else f"{figures['min']:.3f}-{figures['max']:.3f}")
        median = "-" if figures["median"] is None else f"{figures['median']:.3f}"
        rows.append((baseline_check.RATIOS[name], *cells, median, spread))
    return align(rows)
