"""The periodic storage settlement of idle cloud sandboxes ([P-40], agents contract §0).

Why a job: storage was only billed when a sandbox did work or was deleted, so an idle sandbox
held disk for free.  Every ``tick_seconds`` one node of the fleet (a claim in shared state, as
the other periodic jobs take) bills each ``ready`` sandbox on a host with a storage price whose
storage was last billed at least ``sandbox_storage_settle_interval_seconds`` ago (an admin
setting, default 3600, 10..86400), up to now.  So an idle sandbox is billed once per interval.

Never twice: each sandbox is settled in its own transaction under its owner's billing lock,
which re-reads ``storage_charged_at`` and advances it together with the charge -- a task
settlement or a deletion in between just moves the start of the next interval, and a second
node running the same round by accident finds nothing due.

The same round is the safety net for task settlement: a sandbox task whose result was recorded
in the last ``SWEEP_WINDOW`` but not billed (the process stopped in between) is billed here once
it is ``SWEEP_GRACE`` old -- settlement is idempotent, so racing the link's own call is harmless.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from datetime import UTC, datetime, timedelta
from typing import Any

from twisted.logger import Logger

from gateway.invalidation import Invalidation
from gateway.jobs.periodic import RoundService
from gateway.sandboxes.settlement import settle_sandbox_storage, settle_sandbox_task
from gateway.settings.store import Settings
from gateway.state.protocol import SharedState
from gateway.store.cloud_sandboxes import storage_due
from gateway.store.pool import DBRunner
from gateway.store.sandbox_settlement import unbilled_tasks

log = Logger()

SETTING = "advanced_chat_sandbox_storage_settle_interval_seconds"
DEFAULT_INTERVAL = 3600
MIN_INTERVAL = 10
MAX_INTERVAL = 86400
TICK_SECONDS = 10.0
CLAIM_KEY = "lockgate:sandbox-storage:round"
#: an unbilled task result is swept once this old (the link bills it itself right away) ...
SWEEP_GRACE = timedelta(seconds=60)
#: ... and while it is younger than this (older ones are left alone: bounded work per round)
SWEEP_WINDOW = timedelta(days=1)


def settle_interval(settings: Settings) -> int:
    """The admin's interval in seconds; a stored value out of range counts as the default."""
    value = settings.integer(SETTING, DEFAULT_INTERVAL)
    return value if MIN_INTERVAL <= value <= MAX_INTERVAL else DEFAULT_INTERVAL


class SandboxStorageJob(RoundService):
    failure_message = "sandbox storage settlement failed"

    def __init__(self, reactor: Any, clock: Any, db: DBRunner, state: SharedState,
                 invalidation: Invalidation | None, settings: Callable[[], Settings],
                 tick_seconds: float = TICK_SECONDS) -> None:
        super().__init__(reactor, clock, tick_seconds)
        self._db = db
        self._state = state
        self._invalidation = invalidation
        self._settings = settings
        #: rounds this node ran (took the fleet's claim), for operators and tests
        self.rounds = 0

    def now(self) -> datetime:
        return datetime.fromtimestamp(self._clock.seconds(), UTC)

    def start_round(self) -> Coroutine[Any, Any, None]:
        return self._round()

    async def _round(self) -> None:
        if not await self._state.claim(CLAIM_KEY, max(1, int(self._tick_seconds) - 1)):
            return
        self.rounds += 1
        await self.run_once()
        await self.sweep_tasks()

    async def sweep_tasks(self) -> int:
        """Bill sandbox task results whose settlement was lost; returns how many were billed."""
        now = self.now()
        task_ids = await self._db.transaction(unbilled_tasks, now - SWEEP_WINDOW,
                                              now - SWEEP_GRACE)
        billed = 0
        for task_id in task_ids:
            try:
                settled = await settle_sandbox_task(self._db, self._invalidation, task_id, now)
            except Exception:
                log.failure("settlement of sandbox task {id} failed", id=task_id)
                continue
            billed += settled is not None
        return billed

    async def run_once(self) -> int:
        """Settle every sandbox due now; returns how many were billed."""
        now = self.now()
        due_before = now - timedelta(seconds=settle_interval(self._settings()))
        billed = 0
        seen: set[str] = set()
        while True:
            due = [sandbox_id for sandbox_id in
                   await self._db.transaction(storage_due, due_before) if sandbox_id not in seen]
            if not due:
                return billed
            for sandbox_id in due:
                seen.add(sandbox_id)
                try:
                    settled = await settle_sandbox_storage(
                        self._db, self._invalidation, sandbox_id, now, due_before)
                except Exception:
                    log.failure("storage settlement of sandbox {id} failed", id=sandbox_id)
                    continue
                billed += settled is not None
