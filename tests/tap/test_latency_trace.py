"""The bench-only latency trace is off unless ``LOCKGATE_LATENCY_TRACE`` is set.

Off, it must cost nothing: no wrapper on the /v1 call, the database runner, the access log or
the reactor, and no garbage-collector callback.  (On, it wraps classes for the life of the
process, so it is exercised by ``bench/p99_trace.py``, never inside the test process.)
"""

from __future__ import annotations

import gc

from twisted.internet.task import Clock
from twisted.trial.unittest import TestCase

from gateway.store.pool import DBRunner
from gateway.v1.call import GatewayCall
from tap.access_log import BufferedAccessLog
from tap.latency_trace import ENV, install


class LatencyTraceOffTests(TestCase):
    def test_without_the_variable_nothing_is_wrapped(self) -> None:
        clock = Clock()
        call_later = clock.callLater
        before = (GatewayCall.__init__, GatewayCall._settle, GatewayCall._caller,
                  DBRunner._in_transaction, BufferedAccessLog.flush, list(gc.callbacks))
        for environ in ({}, {ENV: ""}, {ENV: "  "}):
            self.assertIsNone(install(environ, clock))
        self.assertEqual((GatewayCall.__init__, GatewayCall._settle, GatewayCall._caller,
                          DBRunner._in_transaction, BufferedAccessLog.flush,
                          list(gc.callbacks)), before)
        self.assertEqual(clock.callLater, call_later)
