"""Times ``GET /api/logs`` with filters over a million usage rows on SQLite, through the real app.

Why: the usage-log list is the console's heaviest read (issue 8 asks for < 200 ms with filters
over 1,000,000 rows).  This fills a SQLite file (kept between runs; ``--fresh`` rebuilds it),
opens the real ``Lockgate`` on it, listens on loopback and times real HTTP requests with treq.

    .venv/bin/python bench/logs_bench.py [--rows 1000000] [--db PATH] [--fresh]
"""

from __future__ import annotations

import argparse
import os
import random
import sqlite3
import statistics
import tempfile
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import treq
from twisted.internet.defer import ensureDeferred
from twisted.internet.task import react
from twisted.web.client import HTTPConnectionPool
from twisted.web.server import Site

from gateway.store import migrate
from gateway.store.pool import make_engine
from tap.app import Lockgate
from tap.secrets import Secrets

MODELS = ["gpt-4o", "gpt-4o-mini", "gpt-4.1", "o3-mini", "claude-3-5-sonnet", "claude-3-haiku",
          "claude-opus-4", "gemini-2.0-flash", "gemini-1.5-pro", "deepseek-chat",
          "deepseek-reasoner", "qwen-max", "qwen-turbo", "mistral-large", "llama-3.1-70b",
          "grok-2", "moonshot-v1-8k", "glm-4", "text-embedding-3-small", "dall-e-3"]
DAYS = 90
END = datetime(2026, 11, 20, tzinfo=UTC)
REPEATS = 7


def fill(path: str, rows: int) -> None:
    """Create the schema with the real migrations, then bulk-insert ``rows`` usage rows."""
    engine, _ = make_engine(f"sqlite:///{path}")
    migrate.upgrade(engine)
    engine.dispose()
    rng = random.Random(8)
    start = END - timedelta(days=DAYS)
    span = DAYS * 86400
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=OFF")
    sql = ("INSERT INTO usage_logs (request_id, user_id, api_key_id, user_channel_id, channel_id,"
           " model_name, input_tokens, output_tokens, cost_nanos, status, created_at)"
           " VALUES (?,?,?,?,?,?,?,?,?,?,?)")
    chunk = 50_000
    began = time.perf_counter()
    for base in range(0, rows, chunk):
        batch = []
        for i in range(base, min(rows, base + chunk)):
            created = start + timedelta(seconds=span * i / rows)
            user = rng.randint(1, 1000)
            batch.append((f"bench-{i}", user, user * 5 + rng.randint(0, 4),
                          rng.randint(1, 5), rng.randint(1, 10), rng.choice(MODELS),
                          rng.randint(10, 4000), rng.randint(1, 2000),
                          rng.randint(1000, 50_000_000), 0 if rng.random() > 0.02 else 502,
                          created.strftime("%Y-%m-%d %H:%M:%S.%f")))
        conn.executemany(sql, batch)
        conn.commit()
    conn.close()
    print(f"filled {rows:,} rows in {time.perf_counter() - began:.1f} s")


QUERIES = [
    "",
    "?page=1",
    "?page=50&page_size=20",
    "?user_id=17",
    "?user_id=17&page=2&model=claude",
    "?api_key_id=123",
    "?model=gpt",
    "?model=GPT-4O-MINI&page=3",
    "?model=sonnet&from=2026-10-21&to=2026-11-20",
    "?model=no-such-model",
    "?channel_id=3&from=2026-11-01T00:00:00Z&to=2026-11-07T23:59:59Z",
    "?user_channel_id=2&page=10",
    "?from=2026-09-01&to=2026-09-30",
    "?model=deepseek&channel_id=7&from=2026-11-01",
]


async def run(reactor: Any, path: str) -> None:
    app = Lockgate.open(reactor, database=f"sqlite:///{path}",
                        secrets=Secrets.from_master(b"b" * 64))
    port = reactor.listenTCP(0, Site(app.root), interface="127.0.0.1")
    base = f"http://127.0.0.1:{port.getHost().port}"
    pool = HTTPConnectionPool(reactor, persistent=True)
    try:
        setup = await treq.post(base + "/api/setup", json={
            "username": "benchadmin", "email": "bench@example.com",
            "password": "bench password"}, pool=pool)
        body = await treq.json_content(setup)
        if setup.code != 200:
            login = await treq.post(base + "/auth/password/login", json={
                "identifier": "benchadmin", "username": "benchadmin",
                "password": "bench password"}, pool=pool)
            body = await treq.json_content(login)
        headers = {"Authorization": f"Bearer {body['token']}"}
        print(f"{'query':<64} {'median':>8} {'max':>8}  result")
        worst = 0.0
        for query in QUERIES:
            times = []
            summary = ""
            for _ in range(REPEATS):
                began = time.perf_counter()
                response = await treq.get(base + "/api/logs" + query, headers=headers, pool=pool)
                data = await treq.json_content(response)
                times.append((time.perf_counter() - began) * 1000)
                summary = (f"{len(data)} rows" if isinstance(data, list)
                           else f"{len(data['items'])} of {data['total']:,}")
            median = statistics.median(times)
            worst = max(worst, median)
            print(f"/api/logs{query:<55} {median:7.1f}ms {max(times):7.1f}ms  {summary}")
        print(f"slowest median: {worst:.1f} ms")
        for path in ("/api/stats", "/api/channel-usage", "/api/user/logs?page=1"):
            times = []
            for _ in range(3):
                began = time.perf_counter()
                response = await treq.get(base + path, headers=headers, pool=pool)
                await treq.content(response)
                times.append((time.perf_counter() - began) * 1000)
            print(f"(for reference) {path:<49} {statistics.median(times):7.1f}ms")
    finally:
        await pool.closeCachedConnections()
        await port.stopListening()
        await app.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--db", default=os.path.join(tempfile.gettempdir(),
                                                      "lockgate-logs-bench.sqlite3"))
    parser.add_argument("--fresh", action="store_true", help="rebuild the database file")
    args = parser.parse_args()
    if args.fresh or not os.path.exists(args.db):
        for suffix in ("", "-wal", "-shm"):
            if os.path.exists(args.db + suffix):
                os.remove(args.db + suffix)
        fill(args.db, args.rows)
    react(lambda reactor: ensureDeferred(run(reactor, args.db)))


if __name__ == "__main__":
    main()
