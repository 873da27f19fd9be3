"""``/healthz`` (the process answers) and ``/readyz`` (not draining, shared state reachable,
database reachable, schema current)."""

from __future__ import annotations

from typing import Any

import orjson
from twisted.internet.interfaces import IReactorTime
from twisted.logger import Logger
from twisted.web.resource import Resource
from twisted.web.server import NOT_DONE_YET

from gateway.state.protocol import SharedState
from gateway.store.pool import DBRunner
from gateway.store.readiness import database_ready

log = Logger()

#: seconds a readiness probe may take before it answers 503 (operations contract §1)
PROBE_DEADLINE = 2.0


def _json(request: Any, status: int, payload: dict[str, Any]) -> bytes:
    request.setResponseCode(status)
    request.setHeader(b"content-type", b"application/json")
    request.setHeader(b"cache-control", b"no-store")
    return orjson.dumps(payload)


class Healthz(Resource):
    isLeaf = True

    def render_GET(self, request: Any) -> bytes:
        return _json(request, 200, {"status": "ok"})


class DrainingReadyz(Resource):
    """``/readyz`` of a draining process (operations contract §6 step 1): not ready, at once."""

    isLeaf = True

    def render_GET(self, request: Any) -> bytes:
        return _json(request, 503, {"status": "draining"})


class Readyz(Resource):
    isLeaf = True

    def __init__(self, db: DBRunner, state: SharedState | None = None,
                 clock: IReactorTime | None = None) -> None:
        super().__init__()
        self._db = db
        self._state = state
        self._clock = clock

    def render_GET(self, request: Any) -> Any:
        if self._state is not None and not self._state.available:
            # known at once (the state tracks its connections): no waiting on Redis here
            return _json(request, 503, {"status": "shared state unreachable"})
        d = self._db.transaction(database_ready)
        done = False

        def answer(status: int, text: str) -> None:
            nonlocal done
            if done:
                return
            done = True
            if timer is not None and timer.active():
                timer.cancel()
            request.write(_json(request, status, {"status": text}))
            request.finish()

        def answered(current: bool) -> None:
            if current:
                answer(200, "ready")
            else:
                answer(503, "migrations pending")

        def failed(failure: Any) -> None:
            log.failure("readiness probe failed", failure)
            answer(503, "database unreachable")

        # a probe that cannot finish in time answers 503 (operations contract §1)
        timer = (self._clock.callLater(PROBE_DEADLINE, answer, 503, "database unreachable")
                 if self._clock is not None else None)
        d.addCallbacks(answered, failed)
        return NOT_DONE_YET
