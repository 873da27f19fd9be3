"""``/api/user/advanced-chat/runs``: a run, its events (poll or SSE tail), stop (§1.9-§1.11).

The SSE tail ([P-11]) reads the persisted rows -- the single source of truth -- and sleeps
between reads until the run's bus channel says a new event was appended (on any node), with a
slow re-check in case an announcement is lost.  It sends ``: ping`` every 15 s and closes after
the terminal event.
"""

from __future__ import annotations

from typing import Any

import orjson
from twisted.internet.defer import Deferred, ensureDeferred
from twisted.internet.task import LoopingCall

from console.context import ConsoleContext
from console.http import ApiError, json_route, make_app, write_json
from console.routes.assistant_completions import SSE_HEADERS, refused_body
from gateway.assistant.record_views import event_view, run_view, timestamp
from gateway.assistant.run_service import (
    RUN_NOT_FOUND,
    RunService,
    events_channel,
    is_terminal_event,
)
from gateway.links.views import masked_env
from gateway.store.assistant.refused import Refused
from gateway.store.assistant.rows import RunEventRow
from gateway.store.assistant.runs import events_after, find_run
from gateway.store.connector_decisions import pending_for_run

PING_SECONDS = 15.0
#: a tail re-reads this often even when no announcement arrives
RECHECK_SECONDS = 5.0


def _after(request: Any) -> int:
    raw = request.getHeader(b"last-event-id")
    if raw is None:
        values = request.args.get(b"after") or [b"0"]
        raw = values[0]
    text = raw.decode("latin-1").strip()
    return int(text) if text.isdigit() else 0


def _wants_stream(request: Any) -> bool:
    accept = (request.getHeader(b"accept") or b"").decode("latin-1")
    flag = (request.args.get(b"stream") or [b""])[0]
    return "text/event-stream" in accept or flag in (b"1", b"true")


def tail_frame(row: RunEventRow) -> bytes:
    return (b"id: " + str(row.seq).encode() + b"\nevent: " + row.event.encode()
            + b"\ndata: " + orjson.dumps(row.payload) + b"\n\n")


class RunRoutes:
    app = make_app()

    def __init__(self, ctx: ConsoleContext, runs: RunService) -> None:
        self.ctx = ctx
        self.runs = runs

    @app.route("/<string:run_id>", methods=["GET"])
    @json_route
    async def show(self, request: Any, run_id: str) -> Any:
        user = await self.ctx.sessions.user(request)
        run = await self.ctx.db.transaction(lambda conn: find_run(conn, run_id, user["id"]))
        if run is None:
            raise ApiError(404, RUN_NOT_FOUND)
        return run_view(run)

    @app.route("/<string:run_id>/stop", methods=["POST"])
    @json_route
    async def stop(self, request: Any, run_id: str) -> Any:
        user = await self.ctx.sessions.user(request)
        try:
            run = await self.runs.stop(user["id"], run_id)
        except Refused as refusal:
            return refusal.status, refused_body(refusal)
        return run_view(run)

    @app.route("/<string:run_id>/connector-tasks/pending", methods=["GET"])
    @json_route
    async def pending(self, request: Any, run_id: str) -> Any:
        user = await self.ctx.sessions.user(request)
        found = await self.ctx.db.transaction(pending_for_run, user["id"], run_id)
        return [{"id": task.id, "device_id": task.device_id, "device_name": name,
                 "run_id": task.run_id, "action": task.action,
                 "workspace_path": task.workspace_path,
                 "workspace_unrestricted": not task.workspace_path,
                 "payload": masked_env(task.payload),
                 "created_at": timestamp(task.created_at)} for task, name in found]

    @app.route("/<string:run_id>/events", methods=["GET"])
    def events(self, request: Any, run_id: str) -> Deferred[bytes]:
        return ensureDeferred(self._events(request, run_id))

    async def _events(self, request: Any, run_id: str) -> bytes:
        try:
            user = await self.ctx.sessions.user(request)
        except ApiError as error:
            return write_json(request, error.status, error.body())
        user_id, after = user["id"], _after(request)
        if not _wants_stream(request):
            rows = await self.ctx.db.transaction(
                lambda conn: events_after(conn, run_id, after, user_id))
            return write_json(request, 200, [event_view(row) for row in rows])
        run = await self.ctx.db.transaction(lambda conn: find_run(conn, run_id, user_id))
        if run is None:
            return write_json(request, 404, {"error": RUN_NOT_FOUND, "type": "not_found"})
        await _Tail(self, request, run_id, user_id, after).run()
        return b""


class _Tail:
    """One open SSE tail of a run's events."""

    def __init__(self, routes: RunRoutes, request: Any, run_id: str, user_id: int,
                 after: int) -> None:
        self.ctx, self.request = routes.ctx, request
        self.run_id, self.user_id, self.last = run_id, user_id, after
        self.gone = False
        self.woken = False
        self.waiter: Deferred[None] | None = None

    def _wake(self, _message: Any = None) -> None:
        self.woken = True
        waiter, self.waiter = self.waiter, None
        if waiter is not None and not waiter.called:
            waiter.callback(None)

    def _gone(self, _failure: Any) -> None:
        self.gone = True
        self._wake()

    async def run(self) -> None:
        request = self.request
        request.setResponseCode(200)
        for name, value in SSE_HEADERS:
            request.setHeader(name, value)
        request.notifyFinish().addErrback(self._gone)
        unsubscribe = self.ctx.state.subscribe(events_channel(self.run_id), self._wake)
        ping = LoopingCall(lambda: None if self.gone else request.write(b": ping\n\n"))
        ping.clock = self.ctx.clock
        ping.start(PING_SECONDS, now=False)
        try:
            await self._pump()
        finally:
            unsubscribe()
            if ping.running:
                ping.stop()

    async def _pump(self) -> None:
        while not self.gone:
            self.woken = False
            rows = await self.ctx.db.transaction(events_after, self.run_id, self.last,
                                                 self.user_id)
            for row in rows:
                if self.gone:
                    return
                self.request.write(tail_frame(row))
                self.last = row.seq
                if is_terminal_event(row.event, row.payload):
                    return
            if rows or self.woken:
                continue
            run = await self.ctx.db.transaction(find_run, self.run_id, self.user_id)
            if run is None or (not run.active and not self.woken):
                return
            if self.woken:
                continue
            self.waiter = Deferred()
            recheck = self.ctx.clock.callLater(RECHECK_SECONDS, self._wake)
            try:
                await self.waiter
            finally:
                if recheck.active():
                    recheck.cancel()
