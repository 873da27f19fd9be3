"""Admin queries on users: list/search, update (profile, balance, groups, roles), delete.

Rules that protect the installation (console contract §5.12, weaknesses 4, 12, 17):

- the last enabled administrator can never be demoted, disabled or deleted, and an admin can
  never demote, disable or delete themselves -- so "no admin left" (which the origin answered
  by promoting whoever called next) cannot happen.  The enabled-admin rows are locked in id
  order before the target row, so two concurrent demotions on PostgreSQL serialise instead of
  both seeing "another admin is left" (and cannot deadlock);
- a balance change is absolute, never negative, and writes an ``admin_adjust`` ledger row
  (amount = new - old, balance_after, actor) in the same transaction, so the ledger still
  sums to the balance;
- disabling and demotion bump the user's token version so every older session dies at once
  (deletion needs no bump: the row is gone).

API keys, memberships, ledger rows and orders go with a deleted user through ``ON DELETE
CASCADE``; invitees keep their account (``referrer_id`` becomes null).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import func, or_, select, update
from sqlalchemy.engine import Connection

from gateway.store import schema
from gateway.store.catalog_admin import conflict, fetch_row, invalid, unknown_ids
from gateway.store.users import bump_token_version

NOT_FOUND = "User not found"


def _relations(conn: Connection, users: list[dict[str, Any]], *,
               all_rows: bool) -> list[dict[str, Any]]:
    g, m, u = schema.groups, schema.group_memberships, schema.users
    groups = {row["id"]: dict(row) for row in conn.execute(select(g)).mappings()}
    ids = [user["id"] for user in users]
    query = select(m).order_by(m.c.id)
    if not all_rows:
        query = query.where(m.c.user_id.in_(ids))
    by_user: dict[int, list[dict[str, Any]]] = {}
    for row in conn.execute(query).mappings() if ids else []:
        group = groups.get(row["group_id"])
        if group is None:
            continue
        membership = dict(row)
        membership.update(group_name=group["name"], group_multiplier=group["multiplier_nanos"],
                          group_created_at=group["created_at"],
                          group_updated_at=group["updated_at"])
        by_user.setdefault(row["user_id"], []).append(membership)
    referrer_ids = sorted({user["referrer_id"] for user in users if user["referrer_id"]})
    referrers = {
        row["id"]: dict(row) for row in conn.execute(
            select(u.c.id, u.c.username).where(u.c.id.in_(referrer_ids))).mappings()
    } if referrer_ids else {}
    return [
        {"group": groups.get(user["group_id"]), "memberships": by_user.get(user["id"], []),
         "referrer": referrers.get(user["referrer_id"]) if user["referrer_id"] else None}
        for user in users
    ]


def list_users(conn: Connection, search: str | None, page: int | None,
               page_size: int | None) -> dict[str, Any]:
    """All users newest first; with ``page`` set, one page of the (searched) list."""
    u = schema.users
    query = select(u)
    count = select(func.count()).select_from(u)
    if search:
        needle = search.lower()
        match = or_(func.lower(u.c.username).contains(needle, autoescape=True),
                    func.lower(u.c.email).contains(needle, autoescape=True))
        query = query.where(match)
        count = count.where(match)
    query = query.order_by(u.c.created_at.desc(), u.c.id.desc())
    paged = page is not None and page_size is not None
    if paged:
        assert page is not None and page_size is not None
        query = query.limit(page_size).offset((page - 1) * page_size)
    users = [dict(row) for row in conn.execute(query).mappings()]
    total = conn.execute(count).scalar_one()
    relations = _relations(conn, users, all_rows=not paged and not search)
    return {"users": list(zip(users, relations, strict=True)), "total": total}


def _lock_admins(conn: Connection) -> list[int]:
    """Lock every enabled admin row (id order); returns their ids."""
    u = schema.users
    return list(conn.execute(
        select(u.c.id).where(u.c.is_admin.is_(True), u.c.enabled.is_(True))
        .order_by(u.c.id).with_for_update()
    ).scalars())


def _replace_memberships(conn: Connection, user: dict[str, Any], group_ids: list[int],
                         primary: int | None, now: datetime) -> int:
    """Make ``group_ids`` the user's permanent memberships; returns the primary group id."""
    m = schema.group_memberships
    wanted = list(dict.fromkeys(group_ids))
    existing = {row["group_id"]: dict(row) for row in conn.execute(
        select(m).where(m.c.user_id == user["id"])).mappings()}
    for group_id, row in existing.items():
        if row["expires_at"] is None and group_id not in wanted:
            conn.execute(m.delete().where(m.c.id == row["id"]))
    for group_id in wanted:
        _ensure_permanent(conn, user["id"], group_id, existing.get(group_id), now)
    if primary is not None:
        return primary
    return user["group_id"] if user["group_id"] in wanted else wanted[0]


def _ensure_permanent(conn: Connection, user_id: int, group_id: int,
                      row: dict[str, Any] | None, now: datetime) -> None:
    m = schema.group_memberships
    if row is None:
        conn.execute(m.insert().values(user_id=user_id, group_id=group_id, expires_at=None,
                                       created_at=now, updated_at=now))
    elif row["expires_at"] is not None:
        conn.execute(update(m).where(m.c.id == row["id"])
                     .values(expires_at=None, updated_at=now))


def _change_primary(conn: Connection, user: dict[str, Any], group_id: int,
                    now: datetime) -> None:
    """Origin rule: drop the permanent membership in the old primary group, ensure one in
    the new group; timed memberships stay."""
    m = schema.group_memberships
    if group_id == user["group_id"]:
        return
    conn.execute(m.delete().where(m.c.user_id == user["id"], m.c.group_id == user["group_id"],
                                  m.c.expires_at.is_(None)))
    row = conn.execute(select(m).where(m.c.user_id == user["id"],
                                       m.c.group_id == group_id)).mappings().first()
    _ensure_permanent(conn, user["id"], group_id, dict(row) if row else None, now)


def _check_roles(conn: Connection, actor_id: int, user: dict[str, Any],
                 changes: dict[str, Any], admins: list[int]) -> bool:
    """Refuse unsafe role changes; returns True when the change revokes sessions."""
    demote = changes.get("is_admin") is False and user["is_admin"]
    disable = changes.get("enabled") is False and user["enabled"]
    if user["id"] == actor_id and (demote or disable):
        field = "is_admin" if demote else "enabled"
        raise invalid("You cannot demote or disable your own account", field)
    if (demote or disable) and user["is_admin"] and user["enabled"] and len(admins) <= 1:
        raise invalid("Cannot remove the last administrator",
                      "is_admin" if demote else "enabled")
    return bool(demote or disable)


def update_user(conn: Connection, actor_id: int, user_id: int, changes: dict[str, Any],
                now: datetime) -> dict[str, Any]:
    u = schema.users
    admins = _lock_admins(conn)
    user = fetch_row(conn, u, user_id, NOT_FOUND, lock=True)
    revoke = _check_roles(conn, actor_id, user, changes, admins)
    values: dict[str, Any] = {}
    for field, label in (("username", "Username"), ("email", "Email")):
        if field in changes and changes[field] != user[field]:
            taken = conn.execute(
                select(u.c.id).where(u.c[field] == changes[field], u.c.id != user_id)).first()
            if taken:
                raise conflict(f"{label} already exists", field)
            values[field] = changes[field]
    group_ids = changes.get("group_ids")
    group_id = changes.get("group_id")
    if group_ids is not None:
        if unknown_ids(conn, schema.groups, group_ids):
            raise invalid("Group not found", "group_ids")
        if group_id is not None and group_id not in group_ids:
            raise invalid("group_id must be one of group_ids", "group_id")
        values["group_id"] = _replace_memberships(conn, user, group_ids, group_id, now)
    elif group_id is not None:
        if unknown_ids(conn, schema.groups, [group_id]):
            raise invalid("Group not found", "group_id")
        _change_primary(conn, user, group_id, now)
        values["group_id"] = group_id
    for field in ("is_admin", "enabled"):
        if field in changes:
            values[field] = changes[field]
    if "balance_nanos" in changes:
        delta = changes["balance_nanos"] - user["balance_nanos"]
        if delta:
            values["balance_nanos"] = changes["balance_nanos"]
            conn.execute(schema.ledger.insert().values(
                user_id=user_id, kind="admin_adjust", amount_nanos=delta,
                balance_after_nanos=changes["balance_nanos"], actor_user_id=actor_id,
                ref=None, memo="admin balance change", created_at=now))
    if values:
        conn.execute(update(u).where(u.c.id == user_id).values(**values, updated_at=now))
    if revoke:
        bump_token_version(conn, user_id, now)
    fresh = fetch_row(conn, u, user_id, NOT_FOUND)
    return {"user": fresh, "relations": _relations(conn, [fresh], all_rows=False)[0]}


def delete_user(conn: Connection, actor_id: int, user_id: int) -> None:
    u = schema.users
    admins = _lock_admins(conn)
    user = fetch_row(conn, u, user_id, NOT_FOUND, lock=True)
    if user_id == actor_id:
        raise invalid("You cannot delete your own account")
    if user["is_admin"] and user["enabled"] and len(admins) <= 1:
        raise invalid("Cannot delete the last administrator")
    conn.execute(u.delete().where(u.c.id == user_id))
