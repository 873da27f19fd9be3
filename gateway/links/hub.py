"""This node's live device links and long polls, and the bus that reaches the other nodes'.

A device's link lands on any node (DESIGN.md, Scale-out).  Whoever changes the queue -- a task
created or approved, a task cancelled, a token rotated, a result recorded -- acts on this node's
links at once and publishes the same event on the bus so the node that holds the link acts too.
The bus forgets what it cannot deliver, so every second each node also looks at the database
(queued tasks of its devices, terminal tasks somebody waits for): the safety net.  One process
with in-memory state publishes nothing.

Links are duck-typed (``LiveLink``) so the WebSocket protocol and the tests' fakes both fit; a
long poll is a ``Deferred`` waiting for a claim.
"""

from __future__ import annotations

import secrets
from collections import OrderedDict
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, Protocol

import orjson
from twisted.internet.defer import Deferred, ensureDeferred
from twisted.internet.task import LoopingCall
from twisted.logger import Logger

from gateway.state.protocol import SharedState
from gateway.store import connector_tasks as task_store
from gateway.store import devices as device_store
from gateway.store.connector_tasks import TaskRow
from gateway.store.pool import DBRunner

log = Logger()

CHANNEL = "lockgate:links"
#: the database re-check behind the bus (agents contract §6)
RECHECK_SECONDS = 1.0
#: how often live links refresh their devices' ``last_seen_at`` (online window is 60 s)
REFRESH_SECONDS = 20.0
#: close codes (§2.4)
CLOSE_PROTOCOL = 4400
CLOSE_REVOKED = 4401
CLOSE_SUPERSEDED = 4409
#: task ends this node remembers (its own and those announced on the bus), so a waiter that
#: comes after the end fires without a database read
REMEMBERED_ENDS = 4096
#: clock difference between nodes tolerated when deciding "this node heard every end since"
CLOCK_SLACK_SECONDS = 5.0

OutputListener = Callable[[TaskRow, dict[str, Any]], None]


class LiveLink(Protocol):
    device_id: str
    link_id: str

    def pump(self) -> None:
        """Hand over queued tasks while the link has room."""

    def cancel_task(self, task_id: str, reason: str) -> None:
        """Tell the device to abort ``task_id`` (if this link carries it)."""

    def close_link(self, code: int, reason: str) -> None:
        """Close the socket with ``code``."""

    def reserve(self, action: str, user_id: int) -> bool:
        """Promise a slot to a task being created on this node (nothing queued ahead)."""

    def release(self, action: str) -> None:
        """Give back a slot whose task was not created."""

    def deliver(self, task: TaskRow) -> None:
        """Hand over a task created ``running`` on this link."""

    def task_ended(self, task_id: str) -> None:
        """``task_id`` reached its end: it no longer takes a slot of this link."""


class LinkHub:
    def __init__(self, db: DBRunner, state: SharedState, clock: Any, node: str = "") -> None:
        self.db = db
        self.state = state
        self.clock = clock
        self.node = node or secrets.token_hex(6)
        self._sender = secrets.token_hex(8)
        #: device id -> the live link on this node (only after its hello)
        self.links: dict[str, LiveLink] = {}
        #: device id -> long polls waiting for a task
        self._polls: dict[str, list[Callable[[], None]]] = {}
        #: task id -> deferreds waiting for a terminal status
        self._waiters: dict[str, list[Deferred[TaskRow | None]]] = {}
        self._output: list[OutputListener] = []
        self._unsubscribe: Callable[[], None] | None = None
        self._recheck = LoopingCall(self._recheck_now)
        self._recheck.clock = clock
        self._refresh = LoopingCall(self._refresh_now)
        self._refresh.clock = clock
        self._link_counter = 0
        #: task id -> when this node heard that it ended (ids only: rows can be large)
        self._ended: OrderedDict[str, float] = OrderedDict()
        #: ends heard before this moment may be forgotten (not listening yet, or evicted)
        self._heard_from = float("inf")

    # --- lifecycle ---------------------------------------------------------------------------

    def start(self) -> None:
        if self.state.shared_across_processes:
            self._unsubscribe = self.state.subscribe(CHANNEL, self._remote)
        self._heard_from = self.clock.seconds()
        self._recheck.start(RECHECK_SECONDS, now=False)
        self._refresh.start(REFRESH_SECONDS, now=False)

    def stop(self) -> None:
        for loop in (self._recheck, self._refresh):
            if loop.running:
                loop.stop()
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None
        for link in list(self.links.values()):
            link.close_link(1000, "server shutting down")

    def now(self) -> datetime:
        return datetime.fromtimestamp(self.clock.seconds(), UTC)

    def new_link_id(self) -> str:
        self._link_counter += 1
        return f"{self.node}/{self._link_counter}-{secrets.token_hex(4)}"

    # --- links -------------------------------------------------------------------------------

    def attach(self, link: LiveLink) -> None:
        """``link`` said hello: it is now the device's link; any other one is superseded."""
        previous = self.links.get(link.device_id)
        self.links[link.device_id] = link
        if previous is not None and previous is not link:
            previous.close_link(CLOSE_SUPERSEDED, "superseded")
        self._publish({"op": "supersede", "device": link.device_id, "link": link.link_id})
        link.pump()

    def detach(self, link: LiveLink) -> None:
        if self.links.get(link.device_id) is link:
            del self.links[link.device_id]

    async def link_closed(self, device_id: str, link_id: str) -> None:
        """Offline at once; the tasks the link carried fail (``connector disconnected``)."""
        now = self.now()

        def closed(conn: Any) -> list[TaskRow]:
            device_store.release_link(conn, device_id, link_id, now)
            return task_store.fail_claimed_by(conn, link_id, "connector disconnected", now)

        for task in await self.db.transaction(closed):
            self.task_finished(task.id)

    def close_device(self, device_id: str, code: int, reason: str) -> None:
        """Close the device's live socket wherever it is (token rotated, deleted, disabled)."""
        link = self.links.get(device_id)
        if link is not None:
            link.close_link(code, reason)
        self._publish({"op": "close", "device": device_id, "code": code, "reason": reason})

    # --- the queue ---------------------------------------------------------------------------

    def wake(self, device_id: str) -> None:
        """Queued tasks exist for ``device_id``: hand them to its link or long poll."""
        self._wake_local(device_id)
        self._publish({"op": "wake", "device": device_id})

    def _wake_local(self, device_id: str) -> None:
        link = self.links.get(device_id)
        if link is not None:
            link.pump()
        for poll in list(self._polls.get(device_id, ())):
            poll()

    def reserve_link(self, device_id: str, action: str, user_id: int) -> LiveLink | None:
        """The device's link on this node when it can take ``user_id``'s new ``action`` task
        at once (a slot is then promised to it: ``deliver`` or ``release`` it)."""
        link = self.links.get(device_id)
        return link if link is not None and link.reserve(action, user_id) else None

    def cancel(self, device_id: str, task_id: str, reason: str) -> None:
        link = self.links.get(device_id)
        if link is not None:
            link.cancel_task(task_id, reason)
        self._publish({"op": "cancel", "device": device_id, "task": task_id, "reason": reason})

    def add_poll(self, device_id: str, attempt: Callable[[], None]) -> Callable[[], None]:
        """Call ``attempt()`` whenever the device may have work; returns a remover."""
        self._polls.setdefault(device_id, []).append(attempt)

        def remove() -> None:
            polls = self._polls.get(device_id, [])
            if attempt in polls:
                polls.remove(attempt)
            if not polls:
                self._polls.pop(device_id, None)

        return remove

    # --- task outcomes -----------------------------------------------------------------------

    def wait_for(self, task_id: str) -> Deferred[TaskRow | None]:
        """Fires with the task's row once it is terminal (here or on any node)."""
        waiter: Deferred[TaskRow | None] = Deferred(
            lambda d: self._forget_waiter(task_id, d))
        self._waiters.setdefault(task_id, []).append(waiter)
        return waiter

    def _forget_waiter(self, task_id: str, waiter: Deferred[TaskRow | None]) -> None:
        waiters = self._waiters.get(task_id, [])
        if waiter in waiters:
            waiters.remove(waiter)
        if not waiters:
            self._waiters.pop(task_id, None)

    def task_finished(self, task_id: str, row: TaskRow | None = None) -> None:
        """``task_id`` reached a terminal status (``row``, when the caller has it): wake its
        waiters on every node."""
        self._remember_end(task_id)
        if row is not None and row.status not in task_store.ACTIVE:
            # the slot is free before anybody hears of the end (a waiter may create the next
            # task for the same device at once)
            link = self.links.get(row.device_id)
            if link is not None:
                link.task_ended(task_id)
            for waiter in self._waiters.pop(task_id, []):
                waiter.callback(row)
        else:
            self._resolve_local(task_id)
        self._publish({"op": "done", "task": task_id})

    def check_done(self, task_id: str, created_at: datetime | None = None) -> None:
        """Fire ``task_id``'s local waiters if it already ended: a waiter registered after the
        task ended (a fast device, a decision taken before the wait) still fires.  A task
        created while this node was listening ended only if this node heard of it (its own
        end, or one announced on the bus; a lost announcement is the 1 s re-check's job), so
        only older or announced tasks cost a database read."""
        if (task_id not in self._ended and created_at is not None
                and created_at.timestamp() - CLOCK_SLACK_SECONDS > self._heard_from):
            return
        self._resolve_local(task_id)

    def _remember_end(self, task_id: str) -> None:
        self._ended[task_id] = self.clock.seconds()
        self._ended.move_to_end(task_id)
        while len(self._ended) > REMEMBERED_ENDS:
            _, heard_at = self._ended.popitem(last=False)
            self._heard_from = max(self._heard_from, heard_at)

    def _resolve_local(self, task_id: str) -> None:
        if task_id in self._waiters:
            ensureDeferred(self._resolve(task_id)).addErrback(
                lambda f: log.failure("reading task {task} failed", f, task=task_id))

    async def _resolve(self, task_id: str) -> None:
        row = await self.db.transaction(task_store.get, task_id)
        if row is not None and row.status not in task_store.ACTIVE:
            for waiter in self._waiters.pop(task_id, []):
                waiter.callback(row)
        elif row is None:
            for waiter in self._waiters.pop(task_id, []):
                waiter.callback(None)

    def on_output(self, listener: OutputListener) -> None:
        """``listener(task, event)`` receives live ``connector_output`` events of run tasks."""
        self._output.append(listener)

    def output(self, task: TaskRow, event: dict[str, Any]) -> None:
        for listener in list(self._output):
            try:
                listener(task, event)
            except Exception:
                log.failure("connector output listener failed")

    # --- the bus -----------------------------------------------------------------------------

    def _publish(self, message: dict[str, Any]) -> None:
        if not self.state.shared_across_processes:
            return
        message["from"] = self._sender
        d = self.state.publish(CHANNEL, orjson.dumps(message))
        d.addErrback(lambda f: log.warn("links bus publish failed ({error}); the 1 s re-check "
                                        "covers it", error=f.getErrorMessage()))

    def _remote(self, raw: bytes) -> None:
        try:
            message = orjson.loads(raw)
        except orjson.JSONDecodeError:
            return
        if not isinstance(message, dict) or message.get("from") == self._sender:
            return
        op = message.get("op")
        device_id = str(message.get("device", ""))
        if op == "wake":
            self._wake_local(device_id)
        elif op == "cancel":
            link = self.links.get(device_id)
            if link is not None:
                link.cancel_task(str(message.get("task")), str(message.get("reason")))
        elif op == "close":
            link = self.links.get(device_id)
            if link is not None:
                link.close_link(int(message.get("code", CLOSE_REVOKED)),
                                str(message.get("reason", "")))
        elif op == "supersede":
            link = self.links.get(device_id)
            if link is not None and link.link_id != message.get("link"):
                ensureDeferred(self._supersede_if_stale(link))
        elif op == "done":
            task_id = str(message.get("task"))
            self._remember_end(task_id)
            self._resolve_local(task_id)

    async def _supersede_if_stale(self, link: LiveLink) -> None:
        """Another node's link said hello for this device: the database says which one is the
        link of record (the last hello wins); a stale local one is closed 4409."""
        device = await self.db.transaction(device_store.get, link.device_id)
        if device is None or device.link_id != link.link_id:
            link.close_link(CLOSE_SUPERSEDED, "superseded")

    # --- the safety net ----------------------------------------------------------------------

    def _recheck_now(self) -> Deferred[None]:
        d = ensureDeferred(self._recheck_once())
        d.addErrback(lambda f: log.failure("links re-check failed", f))
        return d

    async def _recheck_once(self) -> None:
        if not self.links and not self._polls and not self._waiters:
            return
        waited = list(self._waiters)

        def look(conn: Any) -> tuple[list[str], dict[str, str]]:
            queued = (task_store.devices_with_queued(conn)
                      if self.links or self._polls else [])
            return queued, task_store.statuses(conn, waited) if waited else {}

        queued, statuses = await self.db.transaction(look)
        for device_id in queued:
            if device_id in self.links or device_id in self._polls:
                self._wake_local(device_id)
        for task_id in waited:
            if statuses.get(task_id, "") not in task_store.ACTIVE:
                self._resolve_local(task_id)

    def _refresh_now(self) -> Deferred[None]:
        links = [(device_id, link.link_id) for device_id, link in self.links.items()]
        if not links:
            return Deferred.fromCoroutine(_nothing())
        d = self.db.transaction(device_store.touch_links, links, self.now())
        d.addErrback(lambda f: log.failure("refreshing live links failed", f))
        return d


async def _nothing() -> None:
    return None
