"""``rediss://``: the shared-state contract over TLS, and a server we cannot verify is refused.

A real redis-server listening only with TLS, with a certificate from a throwaway CA.
"""

from __future__ import annotations

import txredisapi
from twisted.internet import reactor
from twisted.internet.defer import CancelledError, TimeoutError
from twisted.trial.unittest import TestCase

from gateway.state.redis import RedisState
from tests.state import test_shared_state as contract


class RedisOverTlsTests(contract.RedisHarness, contract.SharedStateContract, TestCase):
    tls = True

    def test_the_url_asks_for_tls(self) -> None:
        assert self.server.url().startswith("rediss://")

    async def test_unverifiable_server_is_never_used(self) -> None:
        # no ?ca=: the throwaway CA is not among the system trust roots
        url = f"rediss://127.0.0.1:{self.server.port}/0?timeout=0.5&prefix={self.prefix}"
        state = RedisState.from_url(reactor, url)
        starting = state.start()
        # fails (handshake refused, or no usable connection within the timeout), never runs
        with self.assertRaises((txredisapi.ConnectionError, TimeoutError)):
            await state.incr("never")
        assert self.server.command("EXISTS", self.prefix + "never") == 0
        await state.stop()
        with self.assertRaises(CancelledError):
            await starting
        self.flushLoggedErrors()

    def test_ca_file_needs_tls(self) -> None:
        with self.assertRaises(ValueError):
            RedisState.from_url(reactor, f"redis://127.0.0.1:1/0?ca={self.server.ca_file}")
