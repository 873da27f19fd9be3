"""The studio control loop (agents contract §4.8): one scheduler for the whole cluster.

Why it looks like this: every node runs the timer (every 10 s of the injected clock), but a
round only runs on the node that holds the ``studio-control-loop`` lease row, so exactly one
node schedules and a dead scheduler is replaced by the next node that ticks after its lease.
Work outcomes are recorded the moment a run ends (the run service's finish hook on the node
that ran it calls ``settle_run``), and again read from the runs' own rows at each tick, so a
run finishing on a node that then dies, or the scheduler moving to another node, never loses
a completion; every settlement is a guarded update, so the second one changes nothing.  A
round, per ``operating`` studio:

0. settle attempts whose linked run ended (and record the cost of runs that outlived their
   attempt: a review decided by the tool, a pause, a cancel, an expired lease);
1. recover expired leases (stopping the linked run), then renew the lease of every attempt
   whose run lives ([P-35]: about every 60 s);
2. triage inbox signals;
3. ``slots = max_concurrent_tasks - executing``;
4. deliver the oldest verified item and end the studio's round;
5. start reviews, then queued work, while slots remain ([P-34]: an item whose start failed with
   an error already recorded is skipped for this round).
"""

from __future__ import annotations

import secrets
from collections.abc import Coroutine
from datetime import UTC, datetime, timedelta
from typing import Any

from twisted.logger import Logger

from gateway.jobs.periodic import RoundService
from gateway.store.assistant.rows import TERMINAL_RUN_STATUSES
from gateway.store.assistant.runs import find_run
from gateway.store.pool import DBRunner
from gateway.store.studio import control, reviews, scheduler_lease
from gateway.store.studio.rows import AttemptRow, CompanyRow
from gateway.studio.work_start import InternalRuns, StartFailed

log = Logger()

LEASE_NAME = "studio-control-loop"
TICK_SECONDS = 10.0
#: a scheduler that stops renewing is replaced after this long
SCHEDULER_LEASE_SECONDS = 30.0
#: ended attempts whose run's cost is still unrecorded are looked at for this long
RUN_COST_WINDOW = timedelta(hours=1)


class ControlLoop(RoundService):
    failure_message = "studio control loop round failed"

    def __init__(self, reactor: Any, clock: Any, db: DBRunner, runs: InternalRuns,
                 node_name: str, tick_seconds: float = TICK_SECONDS,
                 lease_seconds: float = SCHEDULER_LEASE_SECONDS) -> None:
        super().__init__(reactor, clock, tick_seconds)
        self.db = db
        self.runs = runs
        self.holder = f"{node_name}:{secrets.token_hex(6)}"
        self.lease_seconds = lease_seconds
        self._unwatch: Any = None

    def startService(self) -> None:
        super().startService()
        self._unwatch = self.runs.watch(self.settle_run)

    def stopService(self) -> Any:
        if self._unwatch is not None:
            self._unwatch()
            self._unwatch = None
        return super().stopService()

    async def settle_run(self, run_id: str) -> None:
        """A run ended on this node: record its attempt's outcome now, not at the next tick
        (the item of a finished execution is ``awaiting_review`` at once)."""
        attempt = await self.db.transaction(control.attempt_of_run, run_id)
        if attempt is None:
            return
        if attempt.status == "executing":
            await self._settle(attempt, self.now())
        else:
            await self._run_cost(attempt, self.now())

    def now(self) -> datetime:
        return datetime.fromtimestamp(self._clock.seconds(), UTC)

    def start_round(self) -> Coroutine[Any, Any, None] | None:
        return self.round()

    async def round(self) -> None:
        held = await self.db.transaction(scheduler_lease.acquire, LEASE_NAME, self.holder,
                                         self.now(), self.lease_seconds)
        if not held:
            return
        for company in await self.db.transaction(control.operating_companies):
            try:
                await self.studio_round(company)
            except Exception:
                log.failure("studio {id} control round failed", id=company.id)

    async def studio_round(self, company: CompanyRow) -> None:
        now = self.now()
        live = [attempt for attempt in
                await self.db.transaction(control.executing_attempts, company.id)
                if not await self._settle(attempt, now)]
        for ended in await self.db.transaction(control.ended_without_cost, company.id,
                                               now - RUN_COST_WINDOW):
            await self._run_cost(ended, now)
        recovered = await self.db.transaction(control.recover_expired, company.id, now)
        for attempt in recovered:
            if attempt.advanced_chat_run_id:
                await self.runs.stop(company.owner_user_id, attempt.advanced_chat_run_id)
        gone = {attempt.id for attempt in recovered}
        for attempt in live:
            expires = attempt.lease_expires_at
            if attempt.id not in gone and expires is not None \
                    and expires - now <= control.RENEW_BELOW:
                await self.db.transaction(control.renew_lease, attempt.id, now)
        await self.db.transaction(control.triage_signals, company.id, now)
        executing = await self.db.transaction(control.executing_attempts, company.id)
        slots = company.max_concurrent_tasks - len(executing)
        if await self.db.transaction(control.deliver_oldest_verified, company.id, now):
            return
        tried: set[int] = set()
        while slots > 0:
            candidate = await self.db.transaction(control.next_candidate, company.id, tried)
            if candidate is None:
                return
            tried.add(candidate.id)
            kind = "review" if candidate.status == "awaiting_review" else "execution"
            outcome = await self._start(company, candidate.id, kind)
            if outcome == "stop":
                return
            if outcome == "started":
                slots -= 1

    async def _start(self, company: CompanyRow, work_item_id: int, kind: str) -> str:
        """One work or review start (§4.8 (a)-(f)): started, skipped or stop."""
        now = self.now()
        leased = await self.db.transaction(control.lease, company.id, work_item_id, kind,
                                           secrets.token_hex(16), now)
        if isinstance(leased, str):
            # not operating any more (floor, pause): no further starts for this studio
            return "skipped" if leased == control.NOT_READY else "stop"
        try:
            run_id = await self.runs.start(company, leased.item, kind)
        except StartFailed as failure:
            await self.db.transaction(control.start_failed, leased, str(failure), self.now())
            return "skipped"
        linked = await self.db.transaction(control.link_run, leased.attempt.id, run_id,
                                           self.now())
        if not linked:
            await self.runs.stop(company.owner_user_id, run_id)
        return "started"

    async def _run_cost(self, attempt: AttemptRow, now: datetime) -> None:
        """An attempt that ended before its run: once the run ended, its cost is the item's
        too ([P-42])."""
        run = await self.db.transaction(find_run, attempt.advanced_chat_run_id)
        if run is not None and run.status in TERMINAL_RUN_STATUSES:
            await self.db.transaction(control.add_run_cost, attempt.id, run.id,
                                      run.cost_nanos, now)

    async def _settle(self, attempt: AttemptRow, now: datetime) -> bool:
        """Record the outcome of an attempt whose linked run ended; False while it lives."""
        if not attempt.advanced_chat_run_id:
            return False
        run = await self.db.transaction(find_run, attempt.advanced_chat_run_id)
        if run is None or run.status not in TERMINAL_RUN_STATUSES:
            return False
        if attempt.kind == "review":
            await self.db.transaction(reviews.review_run_ended, attempt.id, run.status,
                                      run.error_message, now, run_id=run.id,
                                      cost_nanos=run.cost_nanos)
            return True
        summary = await self.db.transaction(control.run_final_text, run.id)
        await self.db.transaction(
            control.finish_execution, attempt.id, completed=run.status == "completed",
            summary=summary if run.status == "completed" else run.error_message or run.status,
            run_id=run.id, cost_nanos=run.cost_nanos, now=now)
        return True
