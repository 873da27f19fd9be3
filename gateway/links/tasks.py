"""Connector tasks as a service: create, decide, cancel, record a result, wait for the end
(agents contract §1.13).  The run loop (issue 19), the device routes and both device
transports go through this one object, so every change to the queue also wakes the device's
link or long poll, on whatever node it is (``LinkHub``).

Results are recorded with a guarded ``running -> completed|failed`` update, so a retried result
is ignored.  ``result_hooks`` run after a result committed (the sandbox charge of §3.6 is one:
idempotent, and its periodic sweep bills a result whose hook never ran because the process
stopped in between).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

from twisted.internet.defer import Deferred
from twisted.logger import Logger

from gateway.links import ids
from gateway.links.hub import LinkHub
from gateway.links.results import Outcome, parse_result
from gateway.store import connector_tasks as task_store
from gateway.store import task_round_trip
from gateway.store.connector_tasks import TaskRow
from gateway.store.devices import DeviceRow
from gateway.store.driver_sql import DriverSQL
from gateway.store.pool import DBRunner

log = Logger()

#: the waiter deadline of §1.13 (from creation; approval time counts)
WAIT_SECONDS = 600.0
CANCELLED = "cancelled by user"
TIMED_OUT = "connector task timed out"

#: ``hook(task_after)``: runs once a result has committed
ResultHook = Callable[[TaskRow], Awaitable[object]]


class TaskNotActive(Exception):
    """The task is not in a state that allows the change (carries its current status)."""

    def __init__(self, status: str | None) -> None:
        super().__init__(status or "missing")
        self.status = status


class ConnectorTasks:
    def __init__(self, db: DBRunner, hub: LinkHub) -> None:
        self.db = db
        self.hub = hub
        self.result_hooks: list[ResultHook] = []

    def now(self) -> datetime:
        return datetime.fromtimestamp(self.hub.clock.seconds(), UTC)

    async def create(self, *, user_id: int, device_id: str, action: str,
                     payload: dict[str, Any], workspace_path: str = "", run_id: str = "",
                     tool_call_id: str = "", cloud_sandbox_id: str = "",
                     needs_approval: bool = False,
                     payload_in_tx: Callable[[Any], dict[str, Any]] | None = None) -> TaskRow:
        """Queue a task for ``device_id`` (or park it awaiting approval) and wake the device.
        ``payload_in_tx(conn)``, when given, computes the payload inside the creating
        transaction (the §3.5 sandbox gate: checked and used atomically)."""
        status = task_store.PENDING_APPROVAL if needs_approval else task_store.QUEUED
        now = self.now()
        # a device linked to this node with room takes the task straight from the creating
        # transaction: born ``running`` on that link, no queue round trip, no second claim
        link = (self.hub.reserve_link(device_id, action, user_id)
                if status == task_store.QUEUED else None)

        fields: dict[str, Any] = dict(
            task_id=ids.new_id(ids.TASK), user_id=user_id, device_id=device_id, action=action,
            workspace_path=workspace_path, status=status, now=now, run_id=run_id,
            tool_call_id=tool_call_id, cloud_sandbox_id=cloud_sandbox_id,
            claimed_by=link.link_id if link is not None else None)

        def create(conn: Any) -> TaskRow:
            assert payload_in_tx is not None
            return task_store.create(conn, payload=payload_in_tx(conn), **fields)

        try:
            if payload_in_tx is None:
                # the round trip's lean statement (no SQLAlchemy execution per task), on this
                # thread when the database is idle (no hop to the database thread and back)
                task = await self.db.quick_transaction(
                    _insert, fields | {"payload": payload})
            else:
                task = await self.db.transaction(create)
        except BaseException:
            if link is not None:
                link.release(action)
            raise
        if link is not None:
            link.deliver(task)
        elif status == task_store.QUEUED:
            self.hub.wake(device_id)
        return task

    async def decide(self, task_id: str, approved: bool, actor: str = "user",
                     opinion: str = "", payload: dict[str, Any] | None = None) -> TaskRow:
        """Approve (queue and wake; ``payload`` replaces the input when the owner adjusted
        it, [P-15]) or deny a task awaiting approval."""
        denial = f"denied by {actor}" + (f": {opinion}" if opinion else "")
        task = await self.db.transaction(task_store.decide, task_id, approved, denial,
                                         self.now(), payload)
        if task is None:
            current = await self.db.transaction(task_store.get, task_id)
            raise TaskNotActive(current.status if current else None)
        if approved:
            self.hub.wake(task.device_id)
        else:
            self.hub.task_finished(task.id, task)
        return task

    async def cancel(self, task_id: str, reason: str = CANCELLED) -> TaskRow:
        """Fail an active task; a device running it over WebSocket gets ``task_cancel``."""
        before = await self.db.transaction(task_store.fail, task_id, reason, self.now())
        if before is None:
            current = await self.db.transaction(task_store.get, task_id)
            raise TaskNotActive(current.status if current else None)
        if before.status == task_store.RUNNING:
            self.hub.cancel(before.device_id, task_id, reason)
        self.hub.task_finished(task_id)
        return before

    def failed_elsewhere(self, tasks: list[TaskRow], reason: str = CANCELLED) -> None:
        """``tasks`` (as they were) were failed by another transaction -- a run stop fails its
        run's tasks together with the run: devices running one get ``task_cancel`` and every
        waiter wakes, on whatever node."""
        for task in tasks:
            if task.status == task_store.RUNNING:
                self.hub.cancel(task.device_id, task.id, reason)
            self.hub.task_finished(task.id)

    async def record_result(self, device: DeviceRow, task_id: str,
                            body: dict[str, Any]) -> TaskRow | None:
        """Store the device's result (``ResultError`` for a malformed body); ``None`` when the
        task is not running on this device (ignored, safe to retry)."""
        outcome = parse_result(body)
        task = await self.db.quick_transaction(_finish, device.id, task_id, outcome,
                                               self.now())
        if task is not None:
            self.hub.task_finished(task.id, task)
            for hook in self.result_hooks:
                try:
                    await hook(task)
                except Exception:
                    log.failure("a task result hook failed (task {task_id})", task_id=task.id)
        return task

    def wait(self, task: TaskRow, timeout: float = WAIT_SECONDS) -> Deferred[TaskRow | None]:
        """Fires with the terminal row; after ``timeout`` seconds from the task's creation the
        task fails with ``connector task timed out`` (and the device is told to stop)."""
        waiter = self.hub.wait_for(task.id)
        self.hub.check_done(task.id, task.created_at)
        remaining = max(0.0, timeout - (self.hub.clock.seconds() - task.created_at.timestamp()))

        def expire() -> None:
            if not waiter.called:
                Deferred.fromCoroutine(self._expire(task.id)).addErrback(lambda _: None)

        timer = self.hub.clock.callLater(remaining, expire)

        def done(result: TaskRow | None) -> TaskRow | None:
            if timer.active():
                timer.cancel()
            return result

        waiter.addBoth(done)
        return waiter

    async def _expire(self, task_id: str) -> None:
        try:
            await self.cancel(task_id, TIMED_OUT)
        except TaskNotActive:
            self.hub.task_finished(task_id)


def _insert(sql: DriverSQL, fields: dict[str, Any]) -> TaskRow:
    return task_round_trip.insert(sql, **fields)


def _finish(sql: DriverSQL, device_id: str, task_id: str, outcome: Outcome,
            now: datetime) -> TaskRow | None:
    return task_round_trip.finish(sql, task_id, device_id, success=outcome.success,
                                  result=outcome.result, error_message=outcome.error_message,
                                  output=outcome.raw, now=now)
