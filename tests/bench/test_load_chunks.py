"""``bench/load.py`` counts a streamed answer's HTTP chunks: one per write the server made, which
is what the 500-streams phase reports as "HTTP chunks per stream" (issue 22, goal 4: events
that reach the gateway together leave it in one write).  Fed to the driver's protocol as whole
answers and byte by byte."""

from __future__ import annotations

import asyncio
import importlib.util
import sys
from pathlib import Path
from typing import Any

from twisted.trial import unittest

_BENCH = Path(__file__).resolve().parents[2] / "bench"
_spec = importlib.util.spec_from_file_location("bench_load", _BENCH / "load.py")
assert _spec is not None and _spec.loader is not None
load = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = load
_spec.loader.exec_module(load)

PIECES = [b"data: one\n\ndata", b": two\r\n\r\ndata", b": three\n\n" * 40]
ANSWER = (b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
          b"Transfer-Encoding: chunked\r\n\r\n"
          + b"".join(b"%x\r\n%s\r\n" % (len(piece), piece) for piece in PIECES)
          + b"0\r\n\r\n")


class _Sink:
    def write(self, data: bytes) -> None:
        pass


def _read(pieces: list[bytes]) -> Any:
    async def run() -> Any:
        conn = load._Connection()
        conn.transport = _Sink()
        waiting = conn.send(b"GET / HTTP/1.1\r\n\r\n")
        for piece in pieces:
            conn.data_received(piece)
        return await waiting

    return asyncio.run(run())


class ChunkCountTests(unittest.TestCase):
    def test_chunks_are_counted_however_the_reads_split(self) -> None:
        whole = _read([ANSWER])
        by_byte = _read([ANSWER[i:i + 1] for i in range(len(ANSWER))])
        for outcome in (whole, by_byte):
            self.assertEqual(outcome.status, 200)
            self.assertEqual(outcome.chunks, 3)
            self.assertEqual(outcome.body_bytes, len(ANSWER) - ANSWER.index(b"\r\n\r\n") - 4)
            self.assertIsNotNone(outcome.finished)
