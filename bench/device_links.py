"""Agent links under load: many idle device links held by one process, and the task round trip.

    .venv/bin/python bench/device_links.py                  # 200 and 2,000 links, once each
    .venv/bin/python bench/device_links.py --links 2000 --idle 60 --trips 2000 --repeat 3
    .venv/bin/python bench/device_links.py --links 200 --repeat 2 --against /tmp/before
    .venv/bin/python bench/device_links.py --links 200 --idle 1 --profile /tmp/trips.prof

The server is the real app (``Lockgate.open``: the same wiring as ``twistd -n lockgate``, on a
temporary SQLite file, in-memory shared state) listening on loopback in this process, so it can
read its own RSS and CPU time.  The devices are a separate process (asyncio + ``websockets``):
each link says ``hello``, sends a ``heartbeat`` every 20 s (staggered) and answers every ``task``
frame at once with a ``task_result``.  The server pings only links that went quiet for 20 s
(``liveness``), so heartbeating links are not pinged.

Measured:
- RSS per link: the server's RSS with every link welcomed minus its RSS before the first link,
  divided by the number of links (goal <= 32 KiB);
- idle CPU: the server's user+system CPU time over ``--idle`` seconds with every link idle
  (heartbeats, pings, the hub's 1 s re-check and 20 s refresh), as % of one core (goal < 5 %),
  and the reactor thread's share of it (the rest is the database thread);
- round trip: ``ConnectorTasks.create`` -> dispatch over a link -> the device's result ->
  ``ConnectorTasks.wait`` firing, sequential, p50/p99 (goal p50 < 2 ms).  Each trip includes
  the database writes.  The server's CPU time per trip is printed too (with its kernel share
  and context switches): it moves less than wall-clock latency with the load other processes
  put on the machine (the 1-minute load average is printed alongside).

One size and no ``--repeat``/``--against`` measures in this process and prints one JSON
object.  Otherwise every measurement is a fresh process (so RSS starts clean), sizes and
repetitions in turn; ``--against DIR`` (another checkout, e.g. ``git archive`` of an older
commit) runs that checkout's bench alternately with this one as the reference column, and the
summary gives min-max of each figure per column and of this/reference ratios per pair.  This
machine's CPU speed varies between runs minutes apart: quote ratios and ranges, not one figure.
The server says on stderr when each phase starts (``phase idle pid N at T``, then ``trips`` and
``done``), so a sampler outside the process (``py-spy record --pid N``, ``perf record -p N``)
can cover exactly one phase; ``--profile`` records the idle window in CPU time (cProfile with
the thread's CPU clock: a wall-clock profile of an idle process is all ``epoll`` waits).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)


def rss_kib() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def system_seconds() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_stime


def context_switches() -> int:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_nvcsw + usage.ru_nivcsw


def phase(name: str) -> None:
    """Say on stderr which phase starts (pid and time), so an outside sampler (py-spy) can
    cover exactly one phase of the server."""
    print(f"phase {name} pid {os.getpid()} at {time.time():.3f}", file=sys.stderr, flush=True)


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


# --- the devices (child process) ---------------------------------------------------------------

async def device(url: str, token: str, ready: asyncio.Event, index: int) -> None:
    import websockets

    async with websockets.connect(url, additional_headers={"X-Connector-Token": token},
                                  ping_interval=None, max_size=None) as socket:
        await socket.send(json.dumps({
            "type": "hello", "protocol": 1, "hostname": f"bench-{index}", "os": "linux",
            "arch": "amd64", "version": "bench", "kind": "cli", "mode": "platform"}))
        welcome = json.loads(await socket.recv())
        assert welcome["type"] == "welcome", welcome
        ready.set()

        async def heartbeats() -> None:
            await asyncio.sleep(index % 20)
            while True:
                await socket.send('{"type":"heartbeat"}')
                await asyncio.sleep(20)

        beating = asyncio.ensure_future(heartbeats())
        try:
            async for message in socket:
                frame = json.loads(message)
                if frame.get("type") == "task":
                    await socket.send(json.dumps({
                        "type": "task_result", "task_id": frame["task"]["id"],
                        "success": True, "result": "ok"}))
        finally:
            beating.cancel()


async def devices_main(url: str, tokens: list[str]) -> None:
    readies = [asyncio.Event() for _ in tokens]
    running = []
    for start in range(0, len(tokens), 100):
        for index in range(start, min(start + 100, len(tokens))):
            running.append(asyncio.ensure_future(device(url, tokens[index], readies[index],
                                                        index)))
        await asyncio.gather(*(event.wait() for event in readies[start:start + 100]))
    print("ready", flush=True)
    await asyncio.gather(*running)


# --- the server (this process) -----------------------------------------------------------------

async def server_main(reactor: Any, options: argparse.Namespace) -> dict[str, Any]:
    import treq
    from twisted.internet.defer import Deferred
    from twisted.internet.task import deferLater

    from gateway.links import ids
    from gateway.store import devices as device_store
    from tap.app import Lockgate
    from tap.http_channel import LockgateSite
    from tap.secrets import Secrets

    directory = tempfile.mkdtemp(prefix="lockgate-links-bench-")
    app = Lockgate.open(reactor, database=f"sqlite:///{directory}/db.sqlite3",
                        secrets=Secrets.from_master(os.urandom(64)))
    port = reactor.listenTCP(0, LockgateSite(app.root), interface="127.0.0.1",
                             backlog=4096)
    base = f"http://127.0.0.1:{port.getHost().port}"
    setup = await treq.post(f"{base}/api/setup", json={
        "username": "admin", "email": "admin@example.com", "password": "bench password"})
    login = (await setup.json())["token"]
    me = await (await treq.get(f"{base}/api/user/me",
                               headers={"Authorization": f"Bearer {login}"})).json()
    now = app.ctx.now()
    tokens = [ids.new_token() for _ in range(options.links)]

    def provision(conn: Any) -> list[str]:
        created = []
        for number, token in enumerate(tokens):
            row = device_store.create(
                conn, device_id=ids.new_id(ids.DEVICE), user_id=me["id"],
                name=f"bench {number}", remark="", mode="platform", listen_port=0,
                token_hash=ids.token_hash(token), hidden=False, now=now)
            created.append(row.id)
        return created

    device_ids = await app.db.transaction(provision)
    token_file = os.path.join(directory, "tokens.json")
    with open(token_file, "w") as out:
        json.dump(tokens, out)

    for _ in range(3):
        gc.collect()
        await deferLater(reactor, 0.2, lambda: None)
    rss_before = rss_kib()
    url = base.replace("http://", "ws://") + "/api/advanced-chat/connectors/ws"
    child = subprocess.Popen([sys.executable, __file__, "--devices", url, token_file],  # noqa: S603
                             stdout=subprocess.PIPE, text=True)
    ready: Deferred[str] = Deferred()
    reactor.callInThread(lambda: reactor.callFromThread(ready.callback,
                                                        child.stdout.readline()))
    connect_profiler = None
    if options.profile:
        import cProfile

        connect_profiler = cProfile.Profile()
        connect_profiler.enable()
    started, connect_cpu_start = time.monotonic(), cpu_seconds()
    assert (await ready).strip() == "ready", "device process failed"
    connect_seconds = time.monotonic() - started
    connect_cpu = cpu_seconds() - connect_cpu_start
    if connect_profiler is not None:
        connect_profiler.disable()
        connect_profiler.dump_stats(options.profile + ".connect")
    links = app.ctx.links
    assert links is not None and len(links.hub.links) == options.links, len(links.hub.links)
    for _ in range(3):
        gc.collect()
        await deferLater(reactor, 0.5, lambda: None)
    rss_after = rss_kib()

    idle_profiler = None
    if options.profile:
        import cProfile

        idle_profiler = cProfile.Profile(time.thread_time)
        idle_profiler.enable()
    phase("idle")
    cpu_start, wall_start = cpu_seconds(), time.monotonic()
    reactor_cpu_start = time.thread_time()
    await deferLater(reactor, options.idle, lambda: None)
    idle_wall = time.monotonic() - wall_start
    idle_cpu = (cpu_seconds() - cpu_start) / idle_wall
    # the reactor thread's share (the rest: the database thread, e.g. the 20 s refresh)
    idle_reactor_cpu = (time.thread_time() - reactor_cpu_start) / idle_wall
    if idle_profiler is not None:
        idle_profiler.disable()
        idle_profiler.dump_stats(options.profile + ".idle")

    trips: list[float] = []
    device_id = device_ids[0]
    profiler = db_profiler = None
    if options.profile:
        import cProfile

        profiler, db_profiler = cProfile.Profile(), cProfile.Profile()
        def profiled(run: Any) -> Any:
            def run_profiled(*args: Any) -> Any:
                # the database thread's share (cProfile follows one thread per profiler)
                db_profiler.enable()
                try:
                    return run(*args)
                finally:
                    db_profiler.disable()

            return run_profiled

        # both ways into the database: SQLAlchemy's and the lean DB-API one
        app.db._in_transaction = profiled(  # type: ignore[method-assign]
            app.db._in_transaction)
        app.db._in_driver_transaction = profiled(  # type: ignore[method-assign]
            app.db._in_driver_transaction)
        profiler.enable()
    phase("trips")
    trips_cpu_start, trips_system_start = cpu_seconds(), system_seconds()
    switches_start = context_switches()
    for _ in range(options.trips):
        begun = time.perf_counter()
        task = await links.tasks.create(user_id=me["id"], device_id=device_id,
                                        action="read_file", payload={"path": "a"},
                                        workspace_path="/w")
        row = await links.tasks.wait(task)
        trips.append((time.perf_counter() - begun) * 1000)
        assert row is not None and row.status == "completed", row

    trips_cpu = cpu_seconds() - trips_cpu_start
    phase("done")
    trips_system = system_seconds() - trips_system_start
    switches = context_switches() - switches_start
    if profiler is not None and db_profiler is not None:
        profiler.disable()
        profiler.dump_stats(options.profile)
        db_profiler.dump_stats(options.profile + ".db")
    load = os.getloadavg()[0]
    child.terminate()
    child.wait()
    port.stopListening()
    await app.close()
    shutil.rmtree(directory, ignore_errors=True)
    return {
        "links": options.links,
        "connect_seconds": round(connect_seconds, 2),
        # the server's CPU for every link's handshake, hello and welcome (steadier than wall)
        "connect_server_cpu_seconds": round(connect_cpu, 2),
        "rss_before_kib": rss_before,
        "rss_after_kib": rss_after,
        "rss_per_link_kib": round((rss_after - rss_before) / options.links, 1),
        "idle_seconds": options.idle,
        "idle_cpu_percent_of_core": round(idle_cpu * 100, 2),
        "idle_reactor_cpu_percent_of_core": round(idle_reactor_cpu * 100, 2),
        "trips": len(trips),
        "trip_p50_ms": round(percentile(trips, 0.50), 3),
        "trip_p99_ms": round(percentile(trips, 0.99), 3),
        "trip_max_ms": round(max(trips), 3),
        "server_cpu_ms_per_trip": round(trips_cpu * 1000 / len(trips), 3),
        "server_kernel_ms_per_trip": round(trips_system * 1000 / len(trips), 3),
        "server_context_switches_per_trip": round(switches / len(trips), 1),
        "load_average_1m": round(load, 2),
        "cpus": os.cpu_count(),
    }


# --- repeated and alternating runs -------------------------------------------------------------

FIGURES = ("trip_p50_ms", "trip_p99_ms", "server_cpu_ms_per_trip", "idle_cpu_percent_of_core",
           "rss_per_link_kib")


def measure_once(root: str, links: int, options: argparse.Namespace) -> dict[str, Any]:
    command = [sys.executable, os.path.join(root, "bench", "device_links.py"),
               "--links", str(links), "--idle", str(options.idle), "--trips", str(options.trips)]
    done = subprocess.run(command, capture_output=True, text=True, check=True)  # noqa: S603
    result: dict[str, Any] = json.loads(done.stdout[done.stdout.index("{"):])
    return result


def span(values: list[float]) -> str:
    return f"{min(values):g}-{max(values):g}" if len(values) > 1 else f"{values[0]:g}"


def compare(options: argparse.Namespace) -> None:
    columns = {"this": ROOT}
    if options.against:
        columns["reference"] = os.path.abspath(options.against)
    runs: dict[tuple[int, str], list[dict[str, Any]]] = {}
    for links in options.links:
        for repetition in range(options.repeat):
            for name, root in columns.items():
                result = measure_once(root, links, options)
                runs.setdefault((links, name), []).append(result)
                print(json.dumps({"column": name, "repetition": repetition + 1, **result}),
                      flush=True)
    summary: dict[str, Any] = {}
    for (links, name), results in runs.items():
        summary[f"{links} links, {name}"] = {
            figure: span([result[figure] for result in results]) for figure in FIGURES}
        summary[f"{links} links, {name}"]["load_average_1m"] = span(
            [result["load_average_1m"] for result in results])
    if options.against:
        for links in options.links:
            pairs = list(zip(runs[(links, "this")], runs[(links, "reference")], strict=True))
            summary[f"{links} links, this/reference"] = {
                figure: span([round(mine[figure] / theirs[figure], 3) for mine, theirs in pairs
                              if theirs[figure]]) for figure in FIGURES}
    print(json.dumps({"summary": summary}, indent=2))


def main() -> None:
    if os.environ.get("LINKS_BENCH_TRACE"):
        import faulthandler

        faulthandler.dump_traceback_later(float(os.environ["LINKS_BENCH_TRACE"]), exit=True)
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--links", type=int, nargs="+", default=[200, 2000])
    parser.add_argument("--idle", type=float, default=60.0, help="idle CPU window, seconds")
    parser.add_argument("--trips", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=1, help="measurements per size")
    parser.add_argument("--against", metavar="DIR",
                        help="another checkout whose bench runs alternately (reference column)")
    parser.add_argument("--profile", metavar="FILE",
                        help="cProfile the round trips (server side) to FILE, the database "
                        "thread to FILE.db, the idle window to FILE.idle, the links' connect "
                        "and hello to FILE.connect")
    parser.add_argument("--devices", nargs=2, metavar=("URL", "TOKENS"),
                        help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.devices:
        url, token_file = options.devices
        with open(token_file) as tokens:
            asyncio.run(devices_main(url, json.load(tokens)))
        return
    if len(options.links) > 1 or options.repeat > 1 or options.against:
        compare(options)
        return
    options.links = options.links[0]

    from twisted.internet import epollreactor

    epollreactor.install()
    from twisted.internet.task import react

    async def measured(reactor: Any) -> None:
        print(json.dumps(await server_main(reactor, options), indent=2))

    react(measured)


if __name__ == "__main__":
    main()
