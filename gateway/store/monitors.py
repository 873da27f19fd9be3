"""Status monitors and their check history (console contract §3.3, §5.14).

A monitor row carries its latest outcome (``last_*``) so lists need no history scan; each check
also appends a ``status_checks`` row, and recording a check deletes that monitor's checks older
than its ``retention_hours`` in the same transaction, so history stays bounded without a
separate job.  Values arrive validated (the console checks names, targets and ranges).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.engine import Connection

from gateway.store import schema
from gateway.store.catalog_admin import fetch_row

NOT_FOUND = "Status monitor not found"


def create_monitor(conn: Connection, values: dict[str, Any], now: datetime) -> int:
    inserted = conn.execute(schema.status_monitors.insert().values(
        **values, created_at=now, updated_at=now)).inserted_primary_key
    assert inserted is not None
    return int(inserted[0])


def update_monitor(conn: Connection, monitor_id: int, values: dict[str, Any],
                   now: datetime) -> int:
    table = schema.status_monitors
    fetch_row(conn, table, monitor_id, NOT_FOUND, lock=True)
    conn.execute(update(table).where(table.c.id == monitor_id).values(**values, updated_at=now))
    return monitor_id


def delete_monitor(conn: Connection, monitor_id: int) -> None:
    table = schema.status_monitors
    fetch_row(conn, table, monitor_id, NOT_FOUND, lock=True)
    checks = schema.status_checks
    conn.execute(checks.delete().where(checks.c.monitor_id == monitor_id))
    conn.execute(table.delete().where(table.c.id == monitor_id))


def get_monitor(conn: Connection, monitor_id: int) -> dict[str, Any]:
    return fetch_row(conn, schema.status_monitors, monitor_id, NOT_FOUND)


def recent_checks(conn: Connection, monitor_id: int, limit: int) -> list[dict[str, Any]]:
    """Up to ``limit`` newest checks of one monitor, returned oldest -> newest."""
    checks = schema.status_checks
    rows = conn.execute(select(checks).where(checks.c.monitor_id == monitor_id).order_by(
        checks.c.checked_at.desc(), checks.c.id.desc()).limit(limit)).mappings()
    return [dict(row) for row in reversed(list(rows))]


def list_monitors(conn: Connection, *, enabled_only: bool = False,
                  checks: int = 30) -> list[dict[str, Any]]:
    """Monitors (by name, then id), each with ``recent_checks``."""
    table = schema.status_monitors
    query = select(table).order_by(table.c.name, table.c.id)
    if enabled_only:
        query = query.where(table.c.enabled.is_(True))
    monitors = [dict(row) for row in conn.execute(query).mappings()]
    for monitor in monitors:
        monitor["recent_checks"] = recent_checks(conn, monitor["id"], checks)
    return monitors


def with_checks(conn: Connection, monitor_id: int, checks: int = 30) -> dict[str, Any]:
    monitor = get_monitor(conn, monitor_id)
    monitor["recent_checks"] = recent_checks(conn, monitor_id, checks)
    return monitor


def due_monitors(conn: Connection, now: datetime) -> list[dict[str, Any]]:
    """Enabled monitors never checked, or last checked at least ``interval_seconds`` ago."""
    table = schema.status_monitors
    rows = conn.execute(select(table).where(table.c.enabled.is_(True)).order_by(
        table.c.id)).mappings()
    due = []
    for row in rows:
        last = row["last_checked_at"]
        if last is None or last + timedelta(seconds=row["interval_seconds"]) <= now:
            due.append(dict(row))
    return due


def record_check(conn: Connection, monitor_id: int, outcome: dict[str, Any],
                 now: datetime) -> dict[str, Any] | None:
    """Store one check outcome (``status``, ``latency_ms``, ``status_code``, ``message``).

    Returns the stored check row, or None when the monitor was deleted meanwhile.
    """
    table, checks = schema.status_monitors, schema.status_checks
    monitor = conn.execute(select(table.c.id, table.c.retention_hours).where(
        table.c.id == monitor_id).with_for_update()).first()
    if monitor is None:
        return None
    conn.execute(update(table).where(table.c.id == monitor_id).values(
        last_status=outcome["status"], last_latency_ms=outcome["latency_ms"],
        last_status_code=outcome["status_code"], last_message=outcome["message"],
        last_checked_at=now))
    row = {"monitor_id": monitor_id, "status": outcome["status"],
           "latency_ms": outcome["latency_ms"], "status_code": outcome["status_code"],
           "message": outcome["message"], "checked_at": now}
    inserted = conn.execute(checks.insert().values(**row)).inserted_primary_key
    assert inserted is not None
    cutoff = now - timedelta(hours=monitor.retention_hours)
    conn.execute(checks.delete().where(checks.c.monitor_id == monitor_id,
                                       checks.c.checked_at < cutoff))
    return {"id": int(inserted[0]), **row}
