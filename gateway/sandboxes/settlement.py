"""Sandbox charges from the reactor's side: run the settlement transaction, then tell the
wallets (agents contract §3.6, [P-40]).

The money moves in ``gateway.store.sandbox_settlement`` (one transaction, exactly once).  This
module is what the link code and the storage job call: after a charge took anything, the user
is announced on ``USERS`` so every node's cached wallet reloads and the next request admits
against the new balance.  A transient database failure (lost connection, lock timeout) is
retried a few times: the settlement is idempotent, and the work it bills already happened.
"""

from __future__ import annotations

from datetime import datetime

from gateway.invalidation import USERS, Invalidation
from gateway.store import sandbox_settlement
from gateway.store.billing_writes import is_transient
from gateway.store.connector_tasks import TaskRow
from gateway.store.pool import DBRunner
from gateway.store.sandbox_settlement import Settlement

ATTEMPTS = 3


async def _run(db: DBRunner, invalidation: Invalidation | None, fn: object,
               *args: object) -> Settlement | None:
    for attempt in range(1, ATTEMPTS + 1):
        try:
            settled: Settlement | None = await db.transaction(fn, *args)  # type: ignore[arg-type]
            break
        except Exception as exc:
            if attempt == ATTEMPTS or not is_transient(exc):
                raise
    if settled is not None and settled.taken_nanos and invalidation is not None:
        await invalidation.announce(USERS, str(settled.user_id).encode())
    return settled


async def settle_sandbox_task(db: DBRunner, invalidation: Invalidation | None, task_id: str,
                              now: datetime) -> Settlement | None:
    """Bill a sandbox task whose result was just recorded (call it for every task result:
    device tasks, cleanups, unstarted and already billed tasks are a no-op, ``None``)."""
    return await _run(db, invalidation, sandbox_settlement.settle_task, task_id, now)


async def settle_task_result(db: DBRunner, invalidation: Invalidation | None, task: TaskRow,
                             now: datetime) -> Settlement | None:
    """The result hook: bill the task whose result just committed (``task`` is its row as
    committed).  A row that cannot be billed (a device task, a cleanup, never started) says
    so by itself: no transaction for it, which keeps device round trips to their own writes."""
    if not sandbox_settlement.is_billable(task):
        return None
    return await settle_sandbox_task(db, invalidation, task.id, now)


async def settle_sandbox_storage(db: DBRunner, invalidation: Invalidation | None,
                                 sandbox_id: str, now: datetime,
                                 due_before: datetime | None = None) -> Settlement | None:
    """Bill a ready sandbox's storage up to ``now`` (see ``sandbox_settlement.settle_storage``)."""
    return await _run(db, invalidation, sandbox_settlement.settle_storage, sandbox_id, now,
                      due_before)
