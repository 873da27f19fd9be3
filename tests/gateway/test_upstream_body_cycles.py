"""A finished upstream body leaves no reference cycle for the garbage collector.

Why: every upstream answer used to leave a cycle (response <-> body protocol <-> its
transport, and the sink back to the response): ~10 objects per request that only the cyclic
collector frees, a young collection of ~10,000 objects every ~1,000 requests, milliseconds
each in the middle of some request (issue 22, goal 3, ``bench/p99_trace.py --garbage``).
With the collector off, what reference counting alone frees is what a busy gateway frees at
once; these check that the body protocol goes with its last reference, on real loopback
upstreams.
"""

from __future__ import annotations

import gc
import weakref

from twisted.internet import reactor
from twisted.internet.task import deferLater
from twisted.trial.unittest import TestCase

from tests.gateway import test_lean_http as lean
from tests.gateway.test_lean_http import Collected, ok, reply
from tests.support.waiting import wait_for


class UpstreamBodyCycleTests(TestCase):
    serve = lean.LeanClientTests.serve
    close_all = lean.LeanClientTests.close_all

    def setUp(self) -> None:
        if gc.isenabled():
            gc.disable()
            self.addCleanup(gc.enable)

    async def test_a_body_read_whole_is_freed_by_reference_counting(self) -> None:
        _, client, url = self.serve(reply(ok(b'{"ok": true}')))
        response = await client.request("POST", f"{url}/v1/chat", None, b"{}",
                                        first_byte_timeout=5)
        assert await response.read_all(1 << 20) == b'{"ok": true}'
        body = weakref.ref(response._body)
        del response
        await self.next_turn()
        assert body() is None

    async def test_a_streamed_body_is_freed_by_reference_counting(self) -> None:
        _, client, url = self.serve(reply(
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
            b"5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n"))
        response = await client.request("POST", f"{url}/v1/chat", None, b"{}",
                                        first_byte_timeout=5)
        sink = Collected()
        response.deliver(sink, idle_timeout=5)
        await self.wait_finished(sink)
        assert (sink.data, sink.reason) == (b"hello world", None)
        body = weakref.ref(response._body)
        del response
        await self.next_turn()
        assert body() is None

    async def test_an_aborted_body_is_freed_by_reference_counting(self) -> None:
        _, client, url = self.serve(reply(
            b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\npartial"))
        response = await client.request("POST", f"{url}/v1/chat", None, b"{}",
                                        first_byte_timeout=5)
        sink = Collected()
        response.deliver(sink, idle_timeout=5)
        response.abort()
        assert sink.finished and sink.reason is not None
        body = weakref.ref(response._body)
        del response
        await self.next_turn()
        assert body() is None

    async def wait_finished(self, sink: Collected) -> None:
        await wait_for(lambda: sink.finished)

    async def next_turn(self) -> None:
        """One reactor turn: the coroutine driver lets go of the last value it resumed this
        test with (the response itself, when the body was read without waiting)."""
        await deferLater(reactor, 0, lambda: None)
