"""The load generator: raw asyncio HTTP/1.1 over persistent connections, nothing else.

A benchmark client built on a full HTTP library would measure itself; this one pre-builds the
request bytes, parses only the status line, ``Content-Length`` and chunked framing, and keeps one
request in flight per connection.  ``closed_loop`` gives req/s and latency percentiles at a
fixed concurrency; ``streams`` opens many streaming requests at once and times their first body
byte and their end; ``hold_streams`` keeps many slow streams open while a callback samples
memory, then hangs up on all of them.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

_CONTENT_LENGTH = re.compile(rb"\r\ncontent-length:[ \t]*(\d+)", re.IGNORECASE)
_CHUNKED = re.compile(rb"\r\ntransfer-encoding:[ \t]*chunked", re.IGNORECASE)


def build_request(host: str, port: int, path: str, body: bytes, token: str | None) -> bytes:
    head = [f"POST {path} HTTP/1.1", f"Host: {host}:{port}", "Content-Type: application/json",
            f"Content-Length: {len(body)}"]
    if token:
        head.append(f"Authorization: Bearer {token}")
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body


@dataclass
class Outcome:
    status: int
    started: float
    first_byte: float | None = None
    finished: float | None = None
    body_bytes: int = 0
    head: bytes = b""
    body_start: bytes = b""
    #: the longest wait between two pieces of the body after the first (seconds)
    max_gap: float = 0.0
    #: HTTP chunks of a chunked body: one per write the server made (its ``send()`` count)
    chunks: int = 0
    last_piece: float | None = None


class _Connection(asyncio.Protocol):
    """One persistent connection, one request at a time."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.closed = asyncio.get_running_loop().create_future()
        self.waiter: asyncio.Future[Outcome] | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.closed.done():
            self.closed.set_result(None)
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_exception(ConnectionError("connection closed mid-response"))

    def send(self, request: bytes) -> asyncio.Future[Outcome]:
        assert self.transport is not None
        self.buffer = b""
        self.outcome = Outcome(0, time.perf_counter())
        self.head_done = False
        self.chunked = False
        self.remaining = 0
        self.waiter = asyncio.get_running_loop().create_future()
        self.transport.write(request)
        return self.waiter

    def data_received(self, data: bytes) -> None:
        outcome = self.outcome
        if not self.head_done:
            self.buffer += data
            end = self.buffer.find(b"\r\n\r\n")
            if end < 0:
                return
            head = self.buffer[:end]
            data = self.buffer[end + 4:]
            self.buffer = b""
            self.head_done = True
            outcome.head = head
            outcome.status = int(head[9:12])
            self.chunked = bool(_CHUNKED.search(head))
            if not self.chunked:
                match = _CONTENT_LENGTH.search(head)
                self.remaining = int(match.group(1)) if match else 0
                if self.remaining == 0:
                    self._done()
                    return
            if not data:
                return
        now = time.perf_counter()
        if outcome.first_byte is None:
            outcome.first_byte = now
            outcome.body_start = data[:300]
        elif outcome.last_piece is not None and now - outcome.last_piece > outcome.max_gap:
            outcome.max_gap = now - outcome.last_piece
        outcome.last_piece = now
        outcome.body_bytes += len(data)
        if not self.chunked:
            self.remaining -= len(data)
            if self.remaining <= 0:
                self._done()
            return
        self.buffer += data
        self._parse_chunks()

    def _parse_chunks(self) -> None:
        buffer = self.buffer
        pos = 0
        while True:
            if self.remaining > 0:
                take = min(self.remaining, len(buffer) - pos)
                pos += take
                self.remaining -= take
                if self.remaining > 0:
                    break
                continue
            line_end = buffer.find(b"\r\n", pos)
            if line_end < 0:
                break
            line = buffer[pos:line_end]
            if not line:  # the CRLF after a chunk's data
                pos = line_end + 2
                continue
            size = int(line.split(b";")[0], 16)
            if size == 0:  # last chunk; no trailers expected, just the final CRLF
                if len(buffer) < line_end + 4:
                    break
                self.buffer = b""
                self._done()
                return
            pos = line_end + 2
            self.remaining = size
            self.outcome.chunks += 1
        self.buffer = buffer[pos:]

    def _done(self) -> None:
        self.outcome.finished = time.perf_counter()
        if self.outcome.first_byte is None:
            self.outcome.first_byte = self.outcome.finished
        waiter, self.waiter = self.waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result(self.outcome)


async def connect(host: str, port: int) -> _Connection:
    loop = asyncio.get_running_loop()
    _, proto = await loop.create_connection(_Connection, host, port)
    return proto


@dataclass
class LoadResult:
    requests: int = 0
    errors: int = 0
    seconds: float = 0.0
    latencies: list[float] = field(default_factory=list)
    statuses: dict[int, int] = field(default_factory=dict)
    first_error: str = ""

    @property
    def rate(self) -> float:
        return self.requests / self.seconds if self.seconds else 0.0


async def closed_loop(host: str, port: int, request: bytes, concurrency: int,
                      duration: float) -> LoadResult:
    """``concurrency`` connections each sending back-to-back requests for ``duration`` s."""
    result = LoadResult()
    deadline = time.perf_counter() + duration

    async def worker() -> None:
        conn: _Connection | None = None
        while time.perf_counter() < deadline:
            try:
                if conn is None or conn.closed.done():
                    conn = await connect(host, port)
                outcome = await conn.send(request)
            except (OSError, ConnectionError) as exc:
                result.errors += 1
                result.first_error = result.first_error or repr(exc)
                conn = None
                await asyncio.sleep(0.01)
                continue
            result.statuses[outcome.status] = result.statuses.get(outcome.status, 0) + 1
            if outcome.status != 200:
                result.errors += 1
                result.first_error = result.first_error or outcome.body_start[:200].decode(
                    "utf-8", "replace")
                continue
            result.requests += 1
            assert outcome.finished is not None
            result.latencies.append(outcome.finished - outcome.started)
        if conn is not None and conn.transport is not None:
            conn.transport.close()

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    result.seconds = time.perf_counter() - started
    return result


@dataclass
class StreamResult:
    opened: int = 0
    completed: int = 0
    errors: int = 0
    ttfb: list[float] = field(default_factory=list)
    completion: list[float] = field(default_factory=list)
    first_error: str = ""
    extra: dict[str, float] = field(default_factory=dict)


async def _open_many(host: str, port: int, count: int) -> tuple[list[_Connection], list[str]]:
    gate = asyncio.Semaphore(200)  # do not overflow the listen backlog with SYNs

    async def one() -> _Connection | str:
        async with gate:
            try:
                return await connect(host, port)
            except OSError as exc:
                return repr(exc)

    results = await asyncio.gather(*(one() for _ in range(count)))
    return ([c for c in results if isinstance(c, _Connection)],
            [c for c in results if isinstance(c, str)])


async def streams(host: str, port: int, request: bytes, count: int,
                  timeout: float = 120, running: int = 0, ramp: float = 0.0) -> StreamResult:
    """Open ``count`` connections, then start ``count`` streams at once and wait for all.

    With ``ramp`` (seconds), the starts are spread evenly over that time instead of sent
    together: the issue's other form of the figure ("connections opened over 1 s"), where
    each start's TTFB shows the per-request path, not the queue behind 499 others.

    With ``running``, that many more streams are started first and the burst is sent once
    each has its first byte: their longest wait between two chunks (the upstream paces them)
    shows what the burst did to streams already running (``extra``, ms)."""
    result = StreamResult()
    conns, failures = await _open_many(host, port, count + running)
    result.errors += len(failures)
    result.first_error = failures[0] if failures else ""
    ahead, conns = conns[:running], conns[running:]
    result.opened = len(conns)
    ahead_futures = [c.send(request) for c in ahead]
    deadline = time.perf_counter() + 10
    while ahead and time.perf_counter() < deadline and not all(
            c.outcome.first_byte is not None for c in ahead):
        await asyncio.sleep(0.005)
    if ramp > 0 and conns:
        futures = []
        begin = time.perf_counter()
        step = ramp / len(conns)
        for index, conn in enumerate(conns):
            delay = begin + index * step - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            futures.append(conn.send(request))
    else:
        futures = [c.send(request) for c in conns]
    if ahead:
        await asyncio.wait(ahead_futures, timeout=timeout)
        gaps = sorted(c.outcome.max_gap * 1000 for c in ahead
                      if c.outcome.finished is not None and c.outcome.status == 200)
        result.extra["running_streams"] = len(gaps)
        if gaps:
            result.extra["running_max_gap_p50_ms"] = round(percentile(gaps, 50) or 0.0, 1)
            result.extra["running_max_gap_p99_ms"] = round(percentile(gaps, 99) or 0.0, 1)
            result.extra["running_max_gap_max_ms"] = round(gaps[-1], 1)
    done, pending = await asyncio.wait(futures, timeout=timeout)
    for future in done:
        if future.exception() is not None:
            result.errors += 1
            result.first_error = result.first_error or repr(future.exception())
            continue
        outcome = future.result()
        if outcome.status != 200:
            result.errors += 1
            result.first_error = result.first_error or outcome.body_start[:200].decode(
                "utf-8", "replace")
            continue
        assert outcome.first_byte is not None and outcome.finished is not None
        result.completed += 1
        result.ttfb.append(outcome.first_byte - outcome.started)
        result.completion.append(outcome.finished - outcome.started)
    result.errors += len(pending)
    burst_gaps = sorted(c.outcome.max_gap * 1000 for c in conns
                        if c.outcome.finished is not None and c.outcome.status == 200)
    if burst_gaps:
        result.extra["max_gap_p50_ms"] = round(percentile(burst_gaps, 50) or 0.0, 1)
        result.extra["max_gap_p99_ms"] = round(percentile(burst_gaps, 99) or 0.0, 1)
        # events that arrived together leave the gateway in one write (issue 22, goal 4)
        result.extra["chunks_per_stream"] = round(
            sum(c.outcome.chunks for c in conns if c.outcome.finished is not None
                and c.outcome.status == 200) / len(burst_gaps), 2)
    for conn in (*ahead, *conns):
        if conn.transport is not None:
            conn.transport.abort()
    return result


async def hold_streams(host: str, port: int, request: bytes, count: int,
                       while_open: Callable[[StreamResult], Awaitable[None]],
                       first_byte_timeout: float = 60) -> StreamResult:
    """Start ``count`` slow streams, wait for each first byte, run ``while_open``, hang up."""
    result = StreamResult()
    conns, failures = await _open_many(host, port, count)
    result.errors += len(failures)
    result.first_error = failures[0] if failures else ""
    futures = [c.send(request) for c in conns]
    deadline = time.perf_counter() + first_byte_timeout
    while time.perf_counter() < deadline:
        started = sum(1 for c in conns if c.outcome.first_byte is not None)
        if started == len(conns) or all(f.done() for f in futures):
            break
        await asyncio.sleep(0.1)
    result.opened = sum(1 for c in conns
                        if c.outcome.first_byte is not None and not c.closed.done()
                        and c.outcome.status == 200)
    result.ttfb = [c.outcome.first_byte - c.outcome.started for c in conns
                   if c.outcome.first_byte is not None]
    bad = [c for c in conns if c.outcome.status not in (0, 200)]
    if bad:
        result.errors += len(bad)
        result.first_error = result.first_error or bad[0].outcome.body_start[:200].decode(
            "utf-8", "replace")
    await while_open(result)
    for conn in conns:
        if conn.transport is not None:
            conn.transport.abort()
    for future in futures:
        if not future.done():
            future.cancel()
        elif not future.cancelled():
            future.exception()
    return result


def percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]
