"""Admin queries on user channels and who may use them (console contract §5.6).

Updates merge onto the stored row (absent fields keep their values) and the merged row is
validated, so a PUT that only flips ``rate_limit_enabled`` still gets its limits checked.

Deleting a user channel DETACHES its upstream channels (their ``user_channel_id`` becomes null
through ``ON DELETE SET NULL``; they stop being routable until an admin attaches them again)
and drops its access grants (cascade).  Upstream channels, their keys and model configs are
kept on purpose: they are expensive to re-enter and are not owned by the grouping.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import update
from sqlalchemy.engine import Connection

from gateway.store import schema
from gateway.store.catalog_admin import conflict, fetch_row, invalid, name_taken, unknown_ids

NOT_FOUND = "User channel not found"
RATE_MAX = 1_000_000


def check_rate_limit(row: dict[str, Any]) -> None:
    rpm, burst = row["rate_limit_requests_per_minute"], row["rate_limit_burst"]
    if row["rate_limit_enabled"] and not 1 <= rpm <= RATE_MAX:
        raise invalid("Rate limit requests per minute must be between 1 and 1000000",
                      "rate_limit_requests_per_minute")
    if not 0 <= rpm <= RATE_MAX:
        raise invalid("Rate limit requests per minute must be between 0 and 1000000",
                      "rate_limit_requests_per_minute")
    if not 0 <= burst <= RATE_MAX:
        raise invalid("Rate limit burst must be between 0 and 1000000", "rate_limit_burst")


DEFAULTS: dict[str, Any] = {
    "description": "",
    "multiplier_nanos": 1_000_000_000,
    "routing_algorithm": "priority",
    "enabled": True,
    "rate_limit_enabled": False,
    "rate_limit_requests_per_minute": 0,
    "rate_limit_burst": 0,
}


def create_user_channel(conn: Connection, values: dict[str, Any], now: datetime) -> int:
    row = {**DEFAULTS, **values}
    check_rate_limit(row)
    if name_taken(conn, schema.user_channels, "name", row["name"]):
        raise conflict("User channel name already exists", "name")
    inserted = conn.execute(
        schema.user_channels.insert().values(**row, created_at=now, updated_at=now)
    ).inserted_primary_key
    assert inserted is not None
    return int(inserted[0])


def update_user_channel(conn: Connection, uc_id: int, changes: dict[str, Any],
                        now: datetime) -> int:
    table = schema.user_channels
    stored = fetch_row(conn, table, uc_id, NOT_FOUND, lock=True)
    merged = {**stored, **changes}
    check_rate_limit(merged)
    if "name" in changes and name_taken(conn, table, "name", changes["name"], except_id=uc_id):
        raise conflict("User channel name already exists", "name")
    conn.execute(update(table).where(table.c.id == uc_id).values(**changes, updated_at=now))
    return uc_id


def delete_user_channel(conn: Connection, uc_id: int) -> None:
    table = schema.user_channels
    fetch_row(conn, table, uc_id, NOT_FOUND, lock=True)
    # explicit detach as well as the FK rule, so a database without FK enforcement agrees
    conn.execute(update(schema.channels).where(schema.channels.c.user_channel_id == uc_id)
                 .values(user_channel_id=None))
    conn.execute(table.delete().where(table.c.id == uc_id))


def replace_access(conn: Connection, uc_id: int, column: str, ids: list[int],
                   now: datetime) -> int:
    """Make the grants of kind ``column`` (``group_id`` or ``user_id``) exactly ``ids``."""
    access = schema.user_channel_access
    fetch_row(conn, schema.user_channels, uc_id, NOT_FOUND, lock=True)
    target = schema.groups if column == "group_id" else schema.users
    field = "group_ids" if column == "group_id" else "user_ids"
    missing = unknown_ids(conn, target, ids)
    if missing:
        noun = "Group" if column == "group_id" else "User"
        raise invalid(f"{noun} not found: {', '.join(map(str, missing))}", field)
    conn.execute(access.delete().where(access.c.user_channel_id == uc_id,
                                       access.c[column].is_not(None)))
    for item in dict.fromkeys(ids):
        conn.execute(access.insert().values(user_channel_id=uc_id, created_at=now,
                                            **{column: item}))
    return uc_id
