"""Admin queries on groups: list, create, update, delete, and which group is the default.

The registration default is the group named by the setting ``default_group_id`` when that
group exists, else the group named ``user`` (console contract D12 / §5.11).  Marking a group
``is_default`` stores its id in that setting, so renaming it later keeps it the default; the
implicit ``user`` default cannot be renamed away, and the default can never be deleted.

A group is "in use" while any row other than a user-channel access grant references it
(primary group of a user, memberships, channel and config multipliers, and any later table with
a foreign key to groups, e.g. redeem codes): deleting it is refused.  Access grants are removed
with the group (their foreign key cascades).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import func, select, update
from sqlalchemy.engine import Connection

from gateway.store import schema
from gateway.store.catalog_admin import conflict, fetch_row, invalid, name_taken
from gateway.store.upsert import upsert_setting
from gateway.store.users import DEFAULT_GROUP_NAME, DEFAULT_GROUP_SETTING

NOT_FOUND = "Group not found"
#: references that do not keep a group alive (they cascade with it)
_NOT_BLOCKING = {"user_channel_access"}


def default_group_id(conn: Connection) -> int | None:
    g = schema.groups
    chosen = conn.execute(
        select(schema.settings.c.value).where(schema.settings.c.key == DEFAULT_GROUP_SETTING)
    ).scalar()
    if chosen and chosen.strip().isdigit():
        found = conn.execute(select(g.c.id).where(g.c.id == int(chosen))).scalar()
        if found is not None:
            return int(found)
    found = conn.execute(select(g.c.id).where(g.c.name == DEFAULT_GROUP_NAME)).scalar()
    return int(found) if found is not None else None


def _default_is_pinned(conn: Connection, group_id: int) -> bool:
    chosen = conn.execute(
        select(schema.settings.c.value).where(schema.settings.c.key == DEFAULT_GROUP_SETTING)
    ).scalar()
    return chosen is not None and chosen.strip() == str(group_id)


def in_use(conn: Connection, group_id: int) -> bool:
    for table in schema.metadata.sorted_tables:
        if table.name in _NOT_BLOCKING:
            continue
        for fk in table.foreign_keys:
            if fk.column is not schema.groups.c.id:
                continue
            count = conn.execute(
                select(func.count()).select_from(table).where(fk.parent == group_id)
            ).scalar_one()
            if count:
                return True
    return False


def list_groups(conn: Connection) -> dict[str, Any]:
    g = schema.groups
    rows = [dict(r) for r in conn.execute(select(g).order_by(g.c.name)).mappings()]
    return {"groups": rows, "default_id": default_group_id(conn)}


def get_group(conn: Connection, group_id: int) -> dict[str, Any]:
    return {"group": fetch_row(conn, schema.groups, group_id, NOT_FOUND),
            "default_id": default_group_id(conn)}


def _make_default(conn: Connection, group_id: int, now: datetime) -> None:
    upsert_setting(conn, DEFAULT_GROUP_SETTING, str(group_id), now)


def create_group(conn: Connection, values: dict[str, Any], make_default: bool,
                 now: datetime) -> dict[str, Any]:
    if name_taken(conn, schema.groups, "name", values["name"]):
        raise conflict("Group name already exists", "name")
    inserted = conn.execute(
        schema.groups.insert().values(**values, created_at=now, updated_at=now)
    ).inserted_primary_key
    assert inserted is not None
    group_id = int(inserted[0])
    if make_default:
        _make_default(conn, group_id, now)
    return get_group(conn, group_id)


def update_group(conn: Connection, group_id: int, changes: dict[str, Any],
                 make_default: bool | None, now: datetime) -> dict[str, Any]:
    g = schema.groups
    group = fetch_row(conn, g, group_id, NOT_FOUND, lock=True)
    is_default = default_group_id(conn) == group_id
    name = changes.get("name")
    if name is not None and name != group["name"]:
        if is_default and not _default_is_pinned(conn, group_id) and make_default is not True:
            raise invalid("Default user group cannot be renamed", "name")
        if name_taken(conn, g, "name", name, except_id=group_id):
            raise conflict("Group name already exists", "name")
    if make_default is False and is_default:
        raise invalid("Choose another group as the default instead", "is_default")
    if changes:
        conn.execute(update(g).where(g.c.id == group_id).values(**changes, updated_at=now))
    if make_default and not (is_default and _default_is_pinned(conn, group_id)):
        _make_default(conn, group_id, now)
    return get_group(conn, group_id)


def delete_group(conn: Connection, group_id: int) -> None:
    fetch_row(conn, schema.groups, group_id, NOT_FOUND, lock=True)
    if default_group_id(conn) == group_id:
        raise invalid("Default user group cannot be deleted")
    if in_use(conn, group_id):
        raise invalid("Group is in use")
    conn.execute(schema.groups.delete().where(schema.groups.c.id == group_id))
