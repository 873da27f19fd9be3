"""The origin's HTTP long-poll transport, kept for existing device programs (agents contract
§2.3): register, heartbeat, ``tasks/next`` (held up to 25 s on the reactor clock) and a task's
result.  The HTTP side is a console route group; this is what it does.

It claims from the same queue as the WebSocket links with the same atomic claim, so a device
may mix transports and a task is still handed out once.  A waiting poll is woken by the hub (a
task created or approved on any node) and by the 1 s re-check; a claim that lands after the
poll ended (timeout, client gone) is returned to the queue.
"""

from __future__ import annotations

from typing import Any

from twisted.internet.defer import Deferred, ensureDeferred
from twisted.logger import Logger

from gateway.links.hello import HelloError, parse_capacity, parse_hello
from gateway.links.hub import LinkHub
from gateway.links.results import ResultError
from gateway.links.tasks import ConnectorTasks
from gateway.links.views import device_view, dispatch_view
from gateway.store import connector_tasks as task_store
from gateway.store import devices as device_store
from gateway.store import sandbox_hosts as host_store
from gateway.store.connector_tasks import TaskRow
from gateway.store.devices import DeviceRow

log = Logger()

POLL_SECONDS = 25.0
HOST_DISABLED = "Sandbox host is disabled"


class PollRefused(Exception):
    """A device request that cannot be served (status and message for the answer)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class DevicePolling:
    def __init__(self, hub: LinkHub, tasks: ConnectorTasks,
                 poll_seconds: float = POLL_SECONDS) -> None:
        self.hub = hub
        self.tasks = tasks
        self.poll_seconds = poll_seconds

    async def report(self, device: DeviceRow, body: dict[str, Any]) -> DeviceRow:
        """register / heartbeat: the reported fields, online now."""
        try:
            fields = parse_hello(body)
            capacity = parse_capacity(body)
        except HelloError as exc:
            raise PollRefused(400, str(exc)) from None
        now = self.hub.now()

        def report(conn: Any) -> DeviceRow:
            if capacity is not None and host_store.get_by_device(conn, device.id) is not None:
                host_store.record_capacity(conn, device.id, capacity, now)
            return device_store.report(conn, device, fields, now)

        return await self.hub.db.transaction(report)

    def view(self, device: DeviceRow) -> dict[str, Any]:
        return device_view(device, self.hub.now())

    async def next_task(self, device: DeviceRow) -> dict[str, Any]:
        """``{"task": …}`` at once when one is queued, else when one comes, else
        ``{"task": null}`` after ``poll_seconds``.  Cancelling the wait (the client left)
        gives back a task claimed meanwhile."""
        host = await self.hub.db.transaction(host_store.get_by_device, device.id)
        if host is not None and not host.enabled:
            raise PollRefused(403, HOST_DISABLED)
        poll = _Poll(self, device)
        task = await poll.claim()
        if task is None:
            task = await poll.wait()
        return {"task": dispatch_view(task) if task is not None else None}

    async def result(self, device: DeviceRow, task_id: str,
                     body: dict[str, Any]) -> dict[str, Any]:
        try:
            task = await self.tasks.record_result(device, task_id, body)
        except ResultError as exc:
            raise PollRefused(400, str(exc)) from None
        return {"ok": True} if task is not None else {"ok": True, "ignored": True}


class _Poll:
    """One waiting ``tasks/next``."""

    def __init__(self, owner: DevicePolling, device: DeviceRow) -> None:
        self.hub = owner.hub
        self.seconds = owner.poll_seconds
        self.device = device
        self.owner_id = None if device.mode == device_store.SANDBOXD else device.user_id
        self.done = False
        self.busy = False
        self.again = False
        self.answer: Deferred[TaskRow | None] = Deferred(lambda _: self._end())
        self._remove: Any = None
        self._timer: Any = None

    async def claim(self) -> TaskRow | None:
        return await self.hub.db.transaction(
            task_store.claim_next, self.device.id, self.owner_id, task_store.HTTP_CLAIM,
            self.hub.now())

    def wait(self) -> Deferred[TaskRow | None]:
        self._remove = self.hub.add_poll(self.device.id, self.attempt)
        self._timer = self.hub.clock.callLater(self.seconds, self._give, None)
        return self.answer

    def _end(self) -> None:
        self.done = True
        if self._remove is not None:
            self._remove()
        if self._timer is not None and self._timer.active():
            self._timer.cancel()

    def _give(self, task: TaskRow | None) -> None:
        if self.done:
            return
        self._end()
        self.answer.callback(task)

    def attempt(self) -> None:
        if self.done:
            return
        if self.busy:
            self.again = True
            return
        self.busy = True
        ensureDeferred(self._attempt()).addErrback(
            lambda f: log.failure("long poll claim failed", f))

    async def _attempt(self) -> None:
        try:
            while True:
                self.again = False
                task = await self.claim()
                if task is not None:
                    if self.done:
                        await self.hub.db.transaction(task_store.unclaim, task.id,
                                                      task_store.HTTP_CLAIM, self.hub.now())
                    else:
                        self._give(task)
                    return
                if not self.again or self.done:
                    return
        finally:
            self.busy = False
