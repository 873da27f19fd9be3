"""Settling cloud sandbox charges in one transaction each (agents contract §3.6, [P-28], [P-40]).

Why this shape: a host's result for a sandbox task is billed exactly once however often it is
retried or raced (two nodes, a retried frame), and storage time is billed exactly once however
task settlement, deletion and the periodic job interleave.  So every settlement

1. reads the sandbox to learn its owner and takes the owner's billing lock (``lock_balance``);
2. then re-reads what it bills under that lock: the runtime ``reference`` (a second settlement
   of a task finds the first one's charge and does nothing) and ``storage_charged_at`` (the
   start of the storage interval);
3. writes the charge row, the delivered-usage debit (quota, then wallet, floored at 0, wallet
   part as a ``sandbox`` ledger row with the charge's reference) and the new
   ``storage_charged_at`` together.

Storage is billed in whole seconds: the interval ends at ``since + whole seconds`` (not at
``now``), so no fraction of a second is ever lost or billed twice, and the reference
``storage:<sandbox id>:<interval end, RFC 3339 with nanoseconds>`` is unique per interval.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from sqlalchemy import exists, literal, select
from sqlalchemy.engine import Connection

from gateway.assistant.ids import random_id
from gateway.billing.sandbox_pricing import Charge, HostPrices, runtime_charge, storage_charge
from gateway.store import cloud_sandboxes, connector_tasks, sandbox_charges, sandbox_hosts, schema
from gateway.store.cloud_sandboxes import SandboxRow
from gateway.store.delivered_debit import debit_delivered, lock_balance
from gateway.store.sandbox_charges import RUNTIME, STORAGE, ChargeRow
from gateway.store.sandbox_hosts import HostRow

#: ledger kind of a sandbox charge's wallet part (ref = the charge's reference)
LEDGER_KIND = "sandbox"
CHARGE_PREFIX = "asc"
CLEANUP_ACTION = "cleanup_cloud_sandbox"


@dataclass
class Settlement:
    """What one settlement recorded: the charges, and what they took from quota and wallet."""

    user_id: int
    charges: list[ChargeRow] = field(default_factory=list)
    quota_nanos: int = 0
    wallet_nanos: int = 0
    balance_after_nanos: int = 0

    @property
    def taken_nanos(self) -> int:
        return self.quota_nanos + self.wallet_nanos


def prices_of(host: HostRow) -> HostPrices:
    return HostPrices(
        runtime_price_hour_nanos=host.runtime_price_hour_nanos,
        cpu_price_hour_nanos=host.cpu_price_hour_nanos,
        memory_price_gb_hour_nanos=host.memory_price_gb_hour_nanos,
        storage_price_gb_hour_nanos=host.storage_price_gb_hour_nanos,
        runtime_multiplier_nanos=host.runtime_multiplier_nanos)


def rfc3339_nanos(moment: datetime) -> str:
    return f"{moment:%Y-%m-%dT%H:%M:%S}.{moment.microsecond:06d}000Z"


def is_billable(task: connector_tasks.TaskRow) -> bool:
    """A finished sandbox task that was started (success or failure), not a cleanup."""
    return (bool(_sandbox_id(task)) and task.action != CLEANUP_ACTION
            and task.started_at is not None and task.finished_at is not None
            and task.status in (connector_tasks.COMPLETED, connector_tasks.FAILED))


def _sandbox_id(task: connector_tasks.TaskRow) -> str:
    if task.cloud_sandbox_id:
        return task.cloud_sandbox_id
    given = task.payload.get("cloud_sandbox_id") if isinstance(task.payload, dict) else None
    return given if isinstance(given, str) else ""


def _record(conn: Connection, settlement: Settlement, sandbox: SandboxRow, kind: str,
            reference: str, charge: Charge, now: datetime) -> None:
    row = ChargeRow(id=random_id(CHARGE_PREFIX), user_id=sandbox.user_id, sandbox_id=sandbox.id,
                    host_id=sandbox.host_id, kind=kind, reference=reference,
                    quantity=charge.quantity, cost_nanos=charge.cost_nanos,
                    rate_snapshot=charge.rate_snapshot, created_at=now)
    sandbox_charges.insert(conn, row)
    debit = debit_delivered(conn, sandbox.user_id, settlement.balance_after_nanos,
                            charge.cost_nanos, kind=LEDGER_KIND, ref=reference,
                            memo=f"cloud sandbox {sandbox.id} {kind}", now=now)
    settlement.charges.append(row)
    settlement.quota_nanos += debit.quota_nanos
    settlement.wallet_nanos += debit.wallet_nanos
    settlement.balance_after_nanos = debit.balance_after_nanos


def _storage(conn: Connection, settlement: Settlement, sandbox: SandboxRow, host: HostRow,
             now: datetime) -> None:
    price = host.storage_price_gb_hour_nanos
    if price <= 0:
        return
    since = sandbox.storage_since
    seconds = max(0, (now - since) // timedelta(seconds=1))
    charge = storage_charge(seconds, sandbox.disk_gb, price)
    if charge.cost_nanos <= 0:
        return  # nothing billable yet: the interval stays open and is billed later
    until = since + timedelta(seconds=seconds)
    if not cloud_sandboxes.advance_storage(conn, sandbox, until):
        return
    _record(conn, settlement, sandbox, STORAGE, f"storage:{sandbox.id}:{rfc3339_nanos(until)}",
            charge, now)


def unbilled_tasks(conn: Connection, finished_after: datetime, finished_before: datetime,
                   limit: int = 200) -> list[str]:
    """Billable sandbox tasks finished in the window with no runtime charge: results whose
    settlement was lost (a crash between recording the result and billing it)."""
    t, c, s = schema.connector_tasks, schema.sandbox_charges, schema.cloud_sandboxes
    charged = exists().where(c.c.reference == literal("task:") + t.c.id)
    sandbox_kept = exists().where(s.c.id == t.c.cloud_sandbox_id)
    return list(conn.execute(
        select(t.c.id).where(
            t.c.cloud_sandbox_id != "",
            t.c.status.in_((connector_tasks.COMPLETED, connector_tasks.FAILED)),
            t.c.action != CLEANUP_ACTION, t.c.started_at.is_not(None),
            t.c.finished_at > finished_after, t.c.finished_at <= finished_before, ~charged,
            sandbox_kept)
        .order_by(t.c.finished_at, t.c.id).limit(limit)).scalars().all())


def _locked(conn: Connection, sandbox_id: str) -> tuple[Settlement, SandboxRow, HostRow] | None:
    """The owner's billing lock, then the sandbox and its host as they are under it."""
    first = cloud_sandboxes.get(conn, sandbox_id)
    if first is None:
        return None
    balance = lock_balance(conn, first.user_id)
    sandbox = cloud_sandboxes.get(conn, sandbox_id)
    found = sandbox_hosts.get(conn, first.host_id)
    if balance is None or sandbox is None or found is None:
        return None
    return Settlement(user_id=sandbox.user_id, balance_after_nanos=balance), sandbox, found[0]


def settle_task(conn: Connection, task_id: str, now: datetime) -> Settlement | None:
    """Bill a finished sandbox task: runtime, then storage up to ``now``.

    ``None`` (nothing written) when the task is not billable or was billed already.
    """
    task = connector_tasks.get(conn, task_id)
    if task is None or not is_billable(task):
        return None
    locked = _locked(conn, _sandbox_id(task))
    if locked is None:
        return None
    settlement, sandbox, host = locked
    reference = sandbox_charges.runtime_reference(task.id)
    if sandbox_charges.exists(conn, reference):
        return None
    assert task.started_at is not None and task.finished_at is not None
    charge = runtime_charge(task.finished_at - task.started_at, sandbox.cpu_cores_nanos,
                            sandbox.memory_mb, prices_of(host))
    _record(conn, settlement, sandbox, RUNTIME, reference, charge, now)
    if sandbox.status == cloud_sandboxes.READY:
        _storage(conn, settlement, sandbox, host, now)
    return settlement


def settle_storage(conn: Connection, sandbox_id: str, now: datetime,
                   due_before: datetime | None = None) -> Settlement | None:
    """Bill a ready sandbox's storage up to ``now``; with ``due_before``, only when it was not
    billed after that moment (the periodic job's rule).  ``None`` when nothing was billed."""
    locked = _locked(conn, sandbox_id)
    if locked is None:
        return None
    settlement, sandbox, host = locked
    if sandbox.status != cloud_sandboxes.READY:
        return None
    if due_before is not None and sandbox.storage_since > due_before:
        return None
    _storage(conn, settlement, sandbox, host, now)
    return settlement if settlement.charges else None


def _waiting_in(conn: Connection, sandbox_id: str) -> list[str]:
    t = schema.connector_tasks
    return list(conn.execute(select(t.c.id).where(
        t.c.cloud_sandbox_id == sandbox_id,
        t.c.status.in_((connector_tasks.PENDING_APPROVAL, connector_tasks.QUEUED)))
        .order_by(t.c.created_at, t.c.id)).scalars().all())


@dataclass
class Deletion:
    """What deleting a sandbox did: its final storage charge, failed tasks, the cleanup task."""

    sandbox: SandboxRow
    settlement: Settlement
    failed_task_ids: list[str]
    cleanup_task: connector_tasks.TaskRow


DELETED_MESSAGE = "cloud sandbox deleted"


def delete_sandbox(conn: Connection, user_id: int, sandbox_id: str, cleanup_task_id: str,
                   now: datetime) -> Deletion | None:
    """[P-28]: settle storage up to now, mark deleted, fail its waiting tasks, queue the
    host's ``cleanup_cloud_sandbox`` task (never billed).  ``None`` for unknown, foreign or
    already deleted sandboxes."""
    if cloud_sandboxes.get_ready_for_user(conn, user_id, sandbox_id) is None:
        return None
    locked = _locked(conn, sandbox_id)
    if locked is None:
        return None
    settlement, sandbox, host = locked
    if sandbox.user_id != user_id or sandbox.status != cloud_sandboxes.READY:
        return None
    _storage(conn, settlement, sandbox, host, now)
    if not cloud_sandboxes.mark_deleted(conn, sandbox.id, now):
        return None
    failed = []
    for task_id in _waiting_in(conn, sandbox.id):
        if connector_tasks.fail(conn, task_id, DELETED_MESSAGE, now,
                                statuses=(connector_tasks.PENDING_APPROVAL,
                                          connector_tasks.QUEUED)):
            failed.append(task_id)
    cleanup = connector_tasks.create(
        conn, task_id=cleanup_task_id, user_id=sandbox.user_id,
        device_id=host.connector_device_id, action=CLEANUP_ACTION,
        payload={"cloud_sandbox_id": sandbox.id}, workspace_path="",
        status=connector_tasks.QUEUED, now=now, cloud_sandbox_id=sandbox.id)
    return Deletion(sandbox=sandbox, settlement=settlement, failed_task_ids=failed,
                    cleanup_task=cleanup)
