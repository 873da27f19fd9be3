"""One request on its way through the lean client: the bytes to send and its caller's Deferred.

Why a separate object from the connection: a request outlives the connection it was first sent
on (a stale pooled connection that dies unheard makes the pool send it again on a fresh one),
and it exists before it has any connection at all (while connecting).  It is the one place that
decides what the caller hears: exactly one answer, failure or cancellation.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from twisted.internet.defer import Deferred
from twisted.internet.interfaces import IStreamClientEndpoint
from twisted.python.failure import Failure

if TYPE_CHECKING:
    from gateway.channels.lean_connection import LeanConnection
    from gateway.channels.lean_pool import LeanPool
    from gateway.channels.lean_response import LeanResponse


class AnswerAbandoned(Exception):
    """The caller cancelled a request that was already sent (its connection is closed)."""


class Exchange:
    """One request on its way: the bytes to send and the Deferred its caller waits on."""

    __slots__ = ("conn", "connecting", "data", "deferred", "done", "endpoint", "key",
                 "may_resend", "method", "pool")

    def __init__(self, pool: LeanPool, key: Any, endpoint: IStreamClientEndpoint,
                 method: bytes, data: bytes, may_resend: bool) -> None:
        self.pool = pool
        self.key = key
        self.endpoint = endpoint
        self.method = method
        self.data = data
        self.may_resend = may_resend
        self.deferred: Deferred[LeanResponse] = Deferred(self._cancel)
        #: the caller has its answer (a response, a failure or a cancellation)
        self.done = False
        self.conn: LeanConnection | None = None
        self.connecting: Deferred[Any] | None = None

    def _cancel(self, _: object) -> None:
        """The caller gave up (first-byte timeout, client gone): close whatever it holds.
        Once the request was sent this fails with ``AnswerAbandoned`` (as Agent fails with
        ``ResponseNeverReceived``); while connecting, with ``CancelledError``."""
        conn = self.conn
        if conn is not None:
            conn.abort()
            self.fail(Failure(AnswerAbandoned("the request was cancelled before the answer")))
            return
        self.done = True
        connecting, self.connecting = self.connecting, None
        if connecting is not None:
            connecting.cancel()

    def answer(self, response: LeanResponse) -> None:
        if not self.done:
            self.done = True
            self.deferred.callback(response)

    def fail(self, reason: Failure) -> None:
        if not self.done:
            self.done = True
            self.deferred.errback(reason)
