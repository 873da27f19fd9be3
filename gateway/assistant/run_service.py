"""Assistant runs in the background: start, events, stop, deadline and lease (§1.8-§1.11).

Why the state lives in the database and the bus: a run executes on the node that accepted it,
but any node may be asked for its record, tail its events or stop it.  Events are rows (the
poll route reads them) and each append is announced on the shared-state bus
(``assistant-run:<id>``) so an SSE tail on another node wakes at once; a stop is a guarded
database transition plus a ``stop`` message on ``assistant-run-control`` that the owning node
answers by cancelling its worker.  The worker renews a lease on its run; every node sweeps runs
whose lease ran out and fails them, so a node that dies mid-run leaves no run ``running``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

import orjson
from twisted.internet.defer import Deferred, DeferredList, ensureDeferred
from twisted.internet.task import LoopingCall
from twisted.logger import Logger

from gateway.assistant.approval_checker import ApprovalChecker, CheckerAgent
from gateway.assistant.connector_tools import ConnectorTarget, ConnectorTools
from gateway.assistant.conversation_setup import (
    build_tools,
    first_messages,
    session_columns,
    session_messages,
)
from gateway.assistant.event_batcher import EventBatcher
from gateway.assistant.ids import RUN, random_id
from gateway.assistant.mcp_tools import McpClientFactory, McpUnavailable
from gateway.assistant.model_calls import ModelCalls
from gateway.assistant.preparation import Prepared
from gateway.assistant.record_views import run_view, session_view
from gateway.assistant.run_loop import (
    EventSink,
    LoopCancelled,
    LoopFailed,
    LoopLimits,
    LoopOutcome,
    ModelCaller,
    RunLoop,
)
from gateway.assistant.run_settings import RunSettings
from gateway.assistant.sandbox_binding import requires_credit
from gateway.assistant.tool_set import Tool
from gateway.context import GatewayContext
from gateway.links.tasks import ConnectorTasks
from gateway.store.assistant import run_outcomes, run_starts
from gateway.store.assistant.event_batches import Answer
from gateway.store.assistant.refused import conflict, missing
from gateway.store.assistant.rows import RunEventRow, RunRow
from gateway.store.assistant.runs import find_run
from gateway.store.assistant.sessions import is_internal
from gateway.store.connector_tasks import active_for_run
from gateway.store.pool import DBRunner

log = Logger()

CONTROL_CHANNEL = "assistant-run-control"
RUN_NOT_FOUND = "Run not found"
INTERNAL_RUN = "Internal Studio runs are controlled by Studio operations"
NODE_DIED = "Assistant run was interrupted: the server running it stopped"
#: a run whose node has not renewed it for this long is failed by any node
LEASE_SECONDS = 60
ASSISTANT_ROUNDS = 20
TERMINAL_EVENTS = ("done", "error")


def events_channel(run_id: str) -> str:
    return f"assistant-run:{run_id}"


def is_terminal_event(event: str, payload: Any) -> bool:
    return event in TERMINAL_EVENTS or (
        event == "status" and isinstance(payload, dict) and payload.get("message") == "cancelled")


@dataclass(frozen=True)
class RunTools:
    """What a tool hook builds a run's extra tools from (the studio's delegation, intake and
    review tools): the run, its preparation and device binding, and the run's own ways to call
    the model, write events and add a cost to the run's total."""

    run: RunRow
    prepared: Prepared
    connector: ConnectorTools | None
    call_model: ModelCaller
    sink: EventSink
    add_cost: Callable[[int], None]
    clock: Any
    db: DBRunner
    now: Callable[[], datetime]
    #: waits until every event emitted so far is committed (a tool that reads the run's own
    #: stored events, like the studio's review check, must see them)
    events_written: Callable[[], Awaitable[None]]
    mcp: McpClientFactory | None = None


@dataclass
class _Worker:
    run: RunRow
    sink: _RunSink
    loop: RunLoop | None = None
    done: Deferred[None] | None = None
    stopped: bool = False


class _RunSink:
    """Run events of one run: persisted, announced, and the progress columns kept current.

    ``emit`` does not wait for the commit: the group-commit writer keeps the run's events in
    the order they were emitted and skips them once the run has ended, so the loop goes on with
    its model call while the events are written.  ``written()`` waits for all of them; the run
    ends (``done``/``error``) only after it, so the terminal event is always the last one."""

    def __init__(self, service: RunService, run: RunRow) -> None:
        self.service, self.run = service, run
        self._pending: list[Deferred[Any]] = []

    async def emit(self, event: str, payload: dict[str, Any]) -> None:
        values: dict[str, Any] = {}
        if event == "status" and payload.get("message") == "model_round":
            values = {"current_round": payload["round"], "status_message": "model_round"}
        elif event == "status" and payload.get("message") == "retrying":
            values = {"status_message": f"retrying:{payload['attempt']}/{payload['max']}"}
        written = self.service.append(self.run, event, payload, values)
        self._pending = [d for d in self._pending if not d.called]
        self._pending.append(written)
        written.addErrback(lambda f: log.failure("writing run event {event} failed", f,
                                                 event=event))

    async def written(self) -> None:
        pending, self._pending = self._pending, []
        await DeferredList(pending)

    async def start(self) -> bool:
        """``queued -> running`` with ``assistant_started`` and ``loading_tools`` (§1.8 step 2,
        3), in the same group commit; False when the run was stopped before (nothing
        written)."""
        now = self.service.ctx.now()
        started = self.service.append(self.run, "status", {"message": "assistant_started"}, {
            "status": "running", "status_message": "loading_tools", "started_at": now},
            starts=True)
        loading = self.service.append(self.run, "status", {"message": "loading_tools"})
        loading.addErrback(lambda f: log.failure("writing run event loading_tools failed", f))
        self._pending.append(loading)
        return await started is not None

    async def finish(self, outcome: LoopOutcome) -> None:
        """§1.8 step 10: ``completed`` with the answer and the ``done`` event, after every
        event emitted before it (the writer keeps their order)."""
        details, cost, now = outcome.details, outcome.cost_nanos, self.service.ctx.now()
        result = outcome.result()
        await self.service.append(self.run, "done", result, {
            "status": "completed", "status_message": "completed", "cost_nanos": cost,
            "tool_call_details": details, "tool_calls": len(details), "finished_at": now,
            "lease_expires_at": None}, answer=Answer(
                self.run.assistant_message_id, {**result["message"], "tool_calls": details},
                cost))


@dataclass
class RunService:
    ctx: GatewayContext
    node_name: str
    #: the links' task service: connector tools create, wait for and cancel tasks through it
    connector_tasks: ConnectorTasks
    mcp: McpClientFactory | None = None
    lease_seconds: int = LEASE_SECONDS
    workers: dict[str, _Worker] = field(default_factory=dict)
    #: extra tools for a run, asked once its own tools are built (the studio's tools)
    tool_hooks: list[Callable[[RunTools], list[Tool]]] = field(default_factory=list)
    #: told the id of every internal studio run whose worker on this node ended (studio
    #: outcomes at once)
    finish_hooks: list[Callable[[str], Coroutine[Any, Any, None]]] = field(default_factory=list)
    _unsubscribe: Any = None
    _renewer: LoopingCall | None = None
    _sweeper: LoopingCall | None = None
    _events: EventBatcher | None = None

    def start(self) -> None:
        self._unsubscribe = self.ctx.state.subscribe(CONTROL_CHANNEL, self._on_control)
        self._renewer = LoopingCall(self._renew)
        self._renewer.clock = self.ctx.clock
        self._renewer.start(self.lease_seconds / 3, now=False)
        self._sweeper = LoopingCall(self.sweep)
        self._sweeper.clock = self.ctx.clock
        self._sweeper.start(self.lease_seconds / 2, now=False)

    async def stop_all(self) -> None:
        """Process shutdown: stop sweeping and renewing, cancel local workers (their runs are
        left to the lease so another node fails them if this one does not come back)."""
        for looping in (self._renewer, self._sweeper):
            if looping is not None and looping.running:
                looping.stop()
        if self._unsubscribe is not None:
            self._unsubscribe()
        for worker in list(self.workers.values()):
            worker.stopped = True
            if worker.loop is not None:
                worker.loop.cancel()

    @property
    def settings(self) -> RunSettings:
        return RunSettings.read(self.ctx.settings)

    def model_caller(self, user_id: int) -> ModelCaller:
        return ModelCalls(self.ctx, user_id)

    # --- events ---------------------------------------------------------------------------

    def append(self, run: RunRow, event: str, payload: dict[str, Any],
               values: dict[str, Any] | None = None, *, starts: bool = False,
               answer: Answer | None = None) -> Deferred[RunEventRow | None]:
        """A progress event of a live run; none once the run has ended (a stop's ``cancelled``
        stays the last event even when the worker was mid-step).  Written in a group commit
        with the other runs' events (``event_batcher``) and announced after it; the run's
        start and finish too (``starts``, ``answer``)."""
        if self._events is None:
            self._events = EventBatcher(self.ctx.db, self.ctx.reactor, self.announce)
        return self._events.write(run, event, payload, values, self.ctx.now(), starts=starts,
                                  answer=answer)

    def announce(self, rows: list[RunEventRow]) -> None:
        """One message per run for the rows committed together: its newest row.  A tail that
        wakes reads every event after the last one it sent, so the earlier rows of the same
        commit would only wake it again for nothing (and cost a bus message each)."""
        newest = {row.run_id: row for row in rows}
        for row in newest.values():
            message = orjson.dumps({"seq": row.seq, "event": row.event})
            self.ctx.state.publish(events_channel(row.run_id), message).addErrback(
                lambda f: log.failure("run event announcement failed", f))

    # --- start ----------------------------------------------------------------------------

    async def start_run(self, user_id: int,
                        prepared: Prepared | Callable[[Any], Prepared]) -> dict[str, Any]:
        """Interrupt the session's active runs, save the session with an empty answer and a
        ``queued`` run in one transaction, start the worker; the 202 body.  ``prepared`` may
        be the function that prepares the completion (§1.8 step 1): it then runs in that same
        transaction, so a run's whole 202 is one."""
        settings, now = self.settings, self.ctx.now()

        def write(conn: Any) -> tuple[Prepared, int, run_starts.RunStart]:
            ready = prepared if isinstance(prepared, Prepared) else prepared(conn)
            request = ready.request
            generated = not request.session_id
            session_id = request.session_id or random_id("acs")
            request.session_id = session_id
            messages, answer_id = session_messages(ready)
            timeout = (settings.agent_group_run_timeout if request.mode == "agent_group"
                       else settings.assistant_run_timeout)
            return ready, timeout, run_starts.start_run(
                conn, user_id, session_id, session_columns(ready), messages, {
                    "id": random_id(RUN), "user_id": user_id, "session_id": session_id,
                    "assistant_message_id": answer_id, "mode": request.mode,
                    "request": {"model": ready.model}, "node_name": self.node_name,
                    "lease_expires_at": now + timedelta(seconds=self.lease_seconds),
                    "deadline_at": now + timedelta(seconds=timeout)}, now, generated=generated)

        ready, timeout, started = await self.ctx.db.transaction(write)
        run, events, stopped = started.run, started.events, started.stopped
        self.announce(events)
        for run_id in stopped:
            self._cancel_worker(run_id)
        worker = _Worker(run, _RunSink(self, run))
        self.workers[run.id] = worker
        worker.done = ensureDeferred(self._work(worker, user_id, ready, timeout))
        worker.done.addErrback(lambda f: log.failure("assistant run crashed", f))
        return {"session": session_view(started.session), "run": run_view(run)}

    # --- the worker -----------------------------------------------------------------------

    async def _work(self, worker: _Worker, user_id: int, prepared: Prepared,
                    timeout: int) -> None:
        run = worker.run
        deadline = None
        try:
            if not await worker.sink.start():
                return
            deadline = self.ctx.clock.callLater(timeout, self._timed_out, worker)
            connector = self._connector(run, prepared)
            if connector is not None and prepared.checker is not None:
                connector.checker = self._checker(worker, prepared.checker)
            try:
                tools = await build_tools(prepared, self.mcp, connector)
            except McpUnavailable as exc:
                await worker.sink.written()  # ``loading_tools`` before the ``error``
                await self._fail(run, str(exc), 0, [])
                return
            hooked = RunTools(run=run, prepared=prepared, connector=connector,
                              call_model=self.model_caller(user_id), sink=worker.sink,
                              add_cost=self._cost_adder(worker), clock=self.ctx.clock,
                              db=self.ctx.db, now=self.ctx.now, mcp=self.mcp,
                              events_written=worker.sink.written)
            for hook in self.tool_hooks:
                tools.extend(hook(hooked))
            if worker.stopped:
                return
            request = prepared.request
            streamed = request.stream or prepared.agent_stream  # [P-8]
            worker.loop = RunLoop(
                limits=LoopLimits(mode=request.mode, max_rounds=ASSISTANT_ROUNDS, retries=True,
                                  text_events=streamed, stream=streamed),
                call_model=self.model_caller(user_id), tools=tools,
                sink=worker.sink, clock=self.ctx.clock, reactor=self.ctx.reactor,
                messages=first_messages(prepared, tools, connector),
                model_options=request.model_options(prepared.model))
            if worker.stopped:
                worker.loop.cancel()
            await self._drive(worker)
        finally:
            if deadline is not None and deadline.active():
                deadline.cancel()
            self.workers.pop(run.id, None)
            # only a studio operations run has an outcome to record (no transaction for others)
            internal = prepared.team is not None and prepared.team.internal
            for finished in self.finish_hooks if internal else ():
                ensureDeferred(finished(run.id)).addErrback(
                    lambda f: log.failure("a run finish hook failed", f))

    async def _drive(self, worker: _Worker) -> None:
        run, loop = worker.run, worker.loop
        assert loop is not None
        try:
            outcome = await loop.run()
        except LoopCancelled:
            await worker.sink.written()
            await self.ctx.db.transaction(lambda conn: run_outcomes.record_cost(
                conn, run.id, loop.cost_nanos, self.ctx.now()))
            return
        except LoopFailed as failure:
            await worker.sink.written()  # the terminal event comes after all of them
            await self._fail(run, failure.message, loop.cost_nanos, loop.details)
            return
        except Exception:
            log.failure("assistant run {run} failed", run=run.id)
            await worker.sink.written()
            await self._fail(run, "Assistant run failed: internal error", loop.cost_nanos,
                             loop.details)
            return
        # the writer keeps ``done`` after every event emitted before it (no wait needed)
        await worker.sink.finish(outcome)

    async def _fail(self, run: RunRow, error: str, cost_nanos: int,
                    details: list[dict[str, Any]]) -> None:
        now = self.ctx.now()

        def write(conn: Any) -> tuple[RunEventRow | None, list[Any]]:
            tasks = active_for_run(conn, run.id)
            event = run_outcomes.fail(conn, run, error, now, cost_nanos=cost_nanos,
                                      details=details)
            return event, tasks if event is not None else []

        event, tasks = await self.ctx.db.transaction(write)
        if event is not None:
            self.connector_tasks.failed_elsewhere(tasks, error)
            self.announce([event])

    def _connector(self, run: RunRow, prepared: Prepared) -> ConnectorTools | None:
        device, request, sandbox = prepared.device, prepared.request, prepared.sandbox
        if sandbox is not None:
            device = sandbox.device
            sandbox = replace(sandbox, require_credit=requires_credit(self.ctx.settings))
        if device is None:
            return None
        return ConnectorTools(
            tasks=self.connector_tasks,
            target=ConnectorTarget(
                user_id=run.user_id, run_id=run.id, device_id=device.id,
                device_name=device.name, os=device.os, arch=device.arch,
                workspace_path=request.connector_workspace_path,
                approval_mode=request.connector_approval_mode,
                command_prefixes=request.connector_command_prefixes, sandbox=sandbox))

    @staticmethod
    def _cost_adder(worker: _Worker) -> Callable[[int], None]:
        """Adds a cost (a checker's or a delegated member's model calls) to the run's."""

        def add_cost(nanos: int) -> None:
            if worker.loop is not None:
                worker.loop.cost_nanos += nanos

        return add_cost

    def _checker(self, worker: _Worker, agent: CheckerAgent) -> ApprovalChecker:
        """Approval mode ``assistant`` (or a studio's checker member): the checker's calls
        are billed to the run's user and counted in the run's cost."""
        return ApprovalChecker(
            db=self.ctx.db, clock=self.ctx.clock, now=self.ctx.now,
            call_model=self.model_caller(worker.run.user_id), agent=agent,
            sink=worker.sink, add_cost=self._cost_adder(worker),
            tasks=self.connector_tasks)

    def _timed_out(self, worker: _Worker) -> None:
        if worker.loop is not None:
            worker.loop.cancel(timed_out=True)

    # --- stop -----------------------------------------------------------------------------

    async def stop(self, user_id: int, run_id: str, *, studio: bool = False) -> RunRow:
        """§1.11: cancel (or, if ended, answer the run as it is); 404 for another's run; 409
        for a studio operations run unless ``studio`` operations themselves stop it (§4.16)."""
        now = self.ctx.now()

        def write(conn: Any) -> tuple[RunRow, list[RunEventRow], list[Any]]:
            run = find_run(conn, run_id, user_id)
            if run is None:
                raise missing(RUN_NOT_FOUND)
            if not studio and is_internal(conn, run.session_id):
                raise conflict(INTERNAL_RUN)
            tasks = active_for_run(conn, run_id) if run.active else []
            events = run_outcomes.cancel(conn, run, now) if run.active else []
            found = find_run(conn, run_id)
            assert found is not None
            return found, events, tasks if events else []

        run, events, tasks = await self.ctx.db.transaction(write)
        if events:
            self._cancel_worker(run_id)
            self.connector_tasks.failed_elsewhere(tasks)
            self.announce(events)
        return run

    def _cancel_worker(self, run_id: str) -> None:
        worker = self.workers.get(run_id)
        if worker is not None:
            worker.stopped = True
            if worker.loop is not None:
                worker.loop.cancel()
            return
        self.ctx.state.publish(CONTROL_CHANNEL, orjson.dumps({"stop": run_id})).addErrback(
            lambda f: log.failure("run stop announcement failed", f))

    def _on_control(self, message: bytes) -> None:
        try:
            command = orjson.loads(message)
        except orjson.JSONDecodeError:
            return
        run_id = command.get("stop") if isinstance(command, dict) else None
        worker = self.workers.get(run_id) if isinstance(run_id, str) else None
        if worker is not None:
            worker.stopped = True
            if worker.loop is not None:
                worker.loop.cancel()

    # --- lease ----------------------------------------------------------------------------

    async def _renew(self) -> None:
        if not self.workers:
            return
        until = self.ctx.now() + timedelta(seconds=self.lease_seconds)
        ids = list(self.workers)
        try:
            await self.ctx.db.transaction(
                lambda conn: run_outcomes.renew(conn, ids, self.node_name, until))
        except Exception:
            log.failure("renewing assistant run leases failed")

    async def sweep(self) -> int:
        """Fail active runs whose lease expired (their node died); how many were failed."""
        now = self.ctx.now()

        def write(conn: Any) -> tuple[list[RunEventRow], list[Any]]:
            events, tasks = [], []
            for run in run_outcomes.expired(conn, now):
                if run.id in self.workers:
                    continue
                open_tasks = active_for_run(conn, run.id)
                event = run_outcomes.fail(conn, run, NODE_DIED, now,
                                          cost_nanos=run.cost_nanos)
                if event is not None:
                    events.append(event)
                    tasks += open_tasks
            return events, tasks

        try:
            events, tasks = await self.ctx.db.transaction(write)
        except Exception:
            log.failure("sweeping expired assistant runs failed")
            return 0
        self.connector_tasks.failed_elsewhere(tasks, NODE_DIED)
        self.announce(events)
        return len(events)
