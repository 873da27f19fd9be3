"""Admin queries on upstream channels and group multiplier tables (console contract §5.7).

Updates merge onto the stored row.  Health fields are never taken from a client; when a channel
goes from disabled to enabled its failure/auto-disable state is cleared and its health becomes
``pending``.  Scheduled price sync is off unless asked for (weakness 19); when it is on without
a cron the origin's hourly default applies.  Deleting a channel removes its model configs and
multipliers (foreign keys cascade; weakness 14).

Group multiplier tables (per channel, per channel-model config) are replaced as a whole:
``replace_multipliers`` deletes and re-inserts in one transaction, refusing unknown groups.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Table, update
from sqlalchemy.engine import Connection

from gateway.store import schema
from gateway.store.catalog_admin import fetch_row, invalid, unknown_ids

NOT_FOUND = "Channel not found"
DEFAULT_CRON = "0 * * * *"

DEFAULTS: dict[str, Any] = {
    "user_channel_id": None,
    "api_key": "",
    "plugin_config": "",
    "multiplier_nanos": 1_000_000_000,
    "priority": 1,
    "weight": 1,
    "enabled": True,
    "price_sync_enabled": False,
    "price_sync_cron": "",
}

HEALTH_RESET: dict[str, Any] = {
    "consecutive_failures": 0,
    "last_failure_at": None,
    "last_failure_reason": "",
    "auto_disabled_at": None,
    "auto_disabled_reason": "",
    "last_health_status": "pending",
}


def _check_user_channel(conn: Connection, values: dict[str, Any]) -> None:
    uc_id = values.get("user_channel_id")
    if uc_id is not None and unknown_ids(conn, schema.user_channels, [uc_id]):
        raise invalid("Referenced user channel was not found", "user_channel_id")


def _sync_defaults(row: dict[str, Any], values: dict[str, Any]) -> None:
    if row["price_sync_enabled"] and not row["price_sync_cron"]:
        values["price_sync_cron"] = DEFAULT_CRON


def create_channel(conn: Connection, values: dict[str, Any], now: datetime) -> int:
    row = {**DEFAULTS, **values}
    _check_user_channel(conn, row)
    _sync_defaults(row, row)
    inserted = conn.execute(
        schema.channels.insert().values(**row, created_at=now, updated_at=now)
    ).inserted_primary_key
    assert inserted is not None
    return int(inserted[0])


def update_channel(conn: Connection, channel_id: int, changes: dict[str, Any],
                   now: datetime) -> int:
    table = schema.channels
    stored = fetch_row(conn, table, channel_id, NOT_FOUND, lock=True)
    values = dict(changes)
    if "user_channel_id" in values:
        _check_user_channel(conn, values)
    _sync_defaults({**stored, **values}, values)
    if values.get("enabled") is True and (not stored["enabled"]
                                          or stored["auto_disabled_at"] is not None):
        # an admin (re-)enabling a channel also lifts an automatic disable
        values.update(HEALTH_RESET)
    conn.execute(update(table).where(table.c.id == channel_id).values(**values, updated_at=now))
    return channel_id


def delete_channel(conn: Connection, channel_id: int) -> None:
    fetch_row(conn, schema.channels, channel_id, NOT_FOUND, lock=True)
    conn.execute(schema.channels.delete().where(schema.channels.c.id == channel_id))


def multiplier_table(owner: str) -> tuple[Table, str]:
    if owner == "channel":
        return schema.channel_group_multipliers, "channel_id"
    return schema.channel_model_group_multipliers, "channel_model_id"


def replace_multipliers(conn: Connection, owner: str, owner_id: int,
                        items: list[tuple[int, int]], now: datetime) -> int:
    """Make ``[(group_id, multiplier_nanos), ...]`` the multiplier table of one owner
    (``channel`` or ``config``)."""
    owner_table = schema.channels if owner == "channel" else schema.channel_models
    message = NOT_FOUND if owner == "channel" else "Model config not found"
    fetch_row(conn, owner_table, owner_id, message, lock=True)
    missing = unknown_ids(conn, schema.groups, [group_id for group_id, _ in items])
    if missing:
        raise invalid(f"Group not found: {', '.join(map(str, missing))}", "group_id")
    table, column = multiplier_table(owner)
    conn.execute(table.delete().where(table.c[column] == owner_id))
    for group_id, nanos in items:
        conn.execute(table.insert().values(
            **{column: owner_id}, group_id=group_id, multiplier_nanos=nanos,
            created_at=now, updated_at=now))
    return owner_id
