"""The background task poller: drives every open task to an end state by itself.

Why: clients should never have to poll for their refund, and one slow upstream must not hold
up the rest (the origin polled only on a client GET, serially).  Every ``interval`` seconds of
the injected clock a round runs: it leases due tasks in batches (``store.claim_due``: each task
goes to exactly one process, a crashed node's lease just expires), polls them concurrently with
at most ``per_channel`` requests in flight per upstream channel, and stores each outcome in its
own transaction.  A task is polled again one ``interval`` after its last poll; a failed poll
backs off exponentially (capped) for that task only.  A task past its ``expires_at`` ends
``expired`` and is refunded.  All state is in the database, so a restart resumes where the
last process stopped.  Upstream errors stay internal: the stored state is what clients see.
"""

from __future__ import annotations

import secrets
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson
from twisted.internet.defer import Deferred, DeferredSemaphore, ensureDeferred, gatherResults
from twisted.internet.interfaces import IDelayedCall
from twisted.logger import Logger

from gateway.channels.channel_types import normalise_channel_type
from gateway.channels.upstream_url import join, json_headers
from gateway.context import GatewayContext
from gateway.errors import GatewayError
from gateway.store import tasks as store
from gateway.v1.call import guard_url
from gateway.v1.tasks.status import EXPIRED, QUEUED, normalise, progress, upstream_status

log = Logger()
MAX_STATUS_BODY = 4 << 20
#: a task's kind -> the ``family`` label of ``lockgate_task_poller_backlog``
_BACKLOG_FAMILY = {"image": "images", "video": "videos", "artjob": "artjob",
                   "clipgen2": "clipgen2"}


class TaskPoller:
    """One per process; ``start``/``stop`` from ``tap/app.py`` (see the module docstring)."""

    def __init__(self, ctx: GatewayContext, *, node: str = "", interval: float = 5.0,
                 lease: float = 120.0, per_channel: int = 8, batch: int = 200,
                 max_backoff: float = 300.0, poll_timeout: float = 30.0,
                 task_ttl: float = 24 * 3600.0,
                 announce_user: Callable[[int], Awaitable[None]] | None = None) -> None:
        self.ctx = ctx
        #: tells every node that a user's balance changed (a refund), so their wallet
        #: caches reload it; without it only this node's cache is refreshed
        self.announce_user = announce_user
        #: used when no ``task_ttl_seconds`` setting is stored (see ``task_ttl``)
        self._task_ttl = task_ttl
        self.node = (node or "node")[:40]
        self.interval = interval
        self.lease = lease
        self.per_channel = per_channel
        self.batch = batch
        self.max_backoff = max_backoff
        self.poll_timeout = poll_timeout
        self._slots: dict[int, DeferredSemaphore] = {}
        self._timer: IDelayedCall | None = None
        self._round: Deferred[None] | None = None
        self._again = False
        self._running = False
        #: tasks of this round not yet recorded, per metrics family (kind image -> images)
        self.polling: dict[str, int] = {}
        #: totals for stats and tests
        self.polls = 0
        self.rounds = 0

    @property
    def task_ttl(self) -> float:
        """How long a task may stay open before it is expired (and refunded), read at use time:
        the ``task_ttl_seconds`` setting when one is stored, else the constructor value."""
        stored = self.ctx.settings.raw("task_ttl_seconds")
        if stored is not None:
            try:
                seconds = float(int(stored.strip()))
            except ValueError:
                seconds = 0.0
            if seconds > 0:
                return seconds
        return self._task_ttl

    @task_ttl.setter
    def task_ttl(self, seconds: float) -> None:
        self._task_ttl = seconds

    # --- lifecycle --------------------------------------------------------------------------

    def start(self) -> None:
        self._running = True
        self._schedule()

    def stop(self) -> Deferred[None]:
        """Stop scheduling; fires when the round in progress (if any) has finished."""
        self._running = False
        if self._timer is not None and self._timer.active():
            self._timer.cancel()
        self._timer = None
        return self.idle()

    def idle(self) -> Deferred[None]:
        """Fires once no round is running (tests: advance the clock, then wait for this)."""
        done: Deferred[None] = Deferred()
        if self._round is None:
            done.callback(None)
        else:
            self._round.addBoth(lambda _: done.callback(None) if not done.called else None)
        return done

    def wake(self) -> None:
        """Run a round now (a client asked about a task that is due)."""
        if not self._running:
            return
        if self._round is not None:
            self._again = True
            return
        self._tick()

    def _schedule(self) -> None:
        if self._running and self._timer is None:
            self._timer = self.ctx.clock.callLater(self.interval, self._tick)

    def _tick(self) -> None:
        if self._timer is not None and self._timer.active():
            self._timer.cancel()
        self._timer = None
        if self._round is not None:
            return
        round_done = ensureDeferred(self.run_round())
        self._round = round_done

        def finished(result: Any) -> Any:
            self._round = None
            if self._again and self._running:
                self._again = False
                self._tick()
            else:
                self._schedule()
            return None

        round_done.addErrback(lambda f: log.failure("task poll round failed", f))
        round_done.addBoth(finished)

    # --- one round --------------------------------------------------------------------------

    def _now(self) -> datetime:
        return datetime.fromtimestamp(self.ctx.clock.seconds(), UTC)

    async def run_round(self) -> None:
        """Poll every due task once (claims batches until none is left)."""
        self.rounds += 1
        now = self._now()
        while self._running:
            owner = f"{self.node}:{secrets.token_hex(6)}"
            tasks = await self.ctx.db.transaction(store.claim_due, owner, now, self.lease,
                                                  self.batch)
            if not tasks:
                return
            await gatherResults([ensureDeferred(self._one(task, owner, now))
                                 for task in tasks], consumeErrors=True)
            if len(tasks) < self.batch:
                return

    async def _one(self, task: dict[str, Any], owner: str, now: datetime) -> None:
        family = _BACKLOG_FAMILY.get(task["kind"], "other")
        self.polling[family] = self.polling.get(family, 0) + 1
        try:
            await self._poll(task, owner, now)
        except Exception:
            log.failure("polling task {id} failed", id=task["id"])
            await self._retry_later(task, owner, now)
        finally:
            self.polling[family] -= 1

    async def _poll(self, task: dict[str, Any], owner: str, now: datetime) -> None:
        ctx = self.ctx
        if task["expires_at"] <= now:
            await self._record(task, owner, now, {"status": EXPIRED,
                                                  "error": "Task expired before it finished"})
            return
        channel = ctx.catalog.snapshot.channels.get(task["channel_id"])
        if channel is None:
            await self._retry_later(task, owner, now)
            return
        semaphore = self._slots.setdefault(channel.id, DeferredSemaphore(self.per_channel))
        body = await semaphore.run(lambda: ensureDeferred(self._fetch(channel, task)))
        self.polls += 1
        if body is None:
            await self._retry_later(task, owner, now)
            return
        raw = upstream_status(body)
        status = normalise(raw) if raw else QUEUED
        values: dict[str, Any] = {
            "status": status, "upstream_status": (raw or "")[:64], "last_response": body,
            "progress": progress(body, status), "poll_errors": 0,
            "poll_attempts": int(task["poll_attempts"]) + 1,
            "next_poll_at": now + timedelta(seconds=self.interval)}
        await self._record(task, owner, now, values)

    async def _fetch(self, channel: Any, task: dict[str, Any]) -> Any:
        """The upstream status body, or None when this poll failed (kept internal)."""
        ctx = self.ctx
        url = join(channel.base_url, task["status_path"])
        try:
            guard_url(ctx, url)
            channel_type = normalise_channel_type(channel.type)
            headers = json_headers(channel_type, channel.api_key)
            headers.pop(b"content-type", None)
            response = await ctx.upstream.request(b"GET", url, headers, None,
                                                  first_byte_timeout=self.poll_timeout)
            raw = await response.read_all(MAX_STATUS_BODY, idle_timeout=self.poll_timeout)
        except (GatewayError, Exception) as exc:
            log.info("poll of task {id} failed: {e}", id=task["id"], e=str(exc))
            return None
        if response.code >= 400:
            log.info("poll of task {id}: upstream HTTP {code}", id=task["id"],
                     code=response.code)
            return None
        try:
            body = orjson.loads(raw)
        except orjson.JSONDecodeError:
            return None
        return body if isinstance(body, dict) else None

    async def _retry_later(self, task: dict[str, Any], owner: str, now: datetime) -> None:
        errors_seen = int(task["poll_errors"]) + 1
        delay = min(self.max_backoff, self.interval * (2 ** min(errors_seen, 16)))
        await self.ctx.db.transaction(store.release, task["id"], owner,
                                      now + timedelta(seconds=delay), errors_seen, now)

    async def _record(self, task: dict[str, Any], owner: str, now: datetime,
                      values: dict[str, Any]) -> None:
        done = await self.ctx.db.transaction(store.record_poll, task["id"], owner, values, now)
        if done is not None and done.refunded_nanos:
            self.ctx.wallets.forget_user(done.user_id)
            if done.api_key_id is not None:
                self.ctx.wallets.forget_key(done.api_key_id)
            if self.announce_user is not None:
                try:
                    await self.announce_user(done.user_id)
                except Exception:
                    log.failure("announcing the refund of task {id} failed", id=task["id"])
