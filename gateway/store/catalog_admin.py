"""What the admin catalog queries share: their error type and the whole-catalog read.

Admin writes run inside one ``DBRunner`` transaction each; when a rule fails half-way the
function raises ``CatalogError`` and the transaction rolls back, so a refused request changes
nothing.  The console maps ``CatalogError`` to its JSON error body.

Admin lists are small (tens to thousands of rows), so views are assembled from one read of every
catalog table (``load_catalog``) instead of per-row queries.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sqlalchemy import Table, select
from sqlalchemy.engine import Connection

from gateway.store import schema


class CatalogError(Exception):
    """A refused admin write: HTTP-ish status, human message, optional field name."""

    def __init__(self, status: int, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.field = field


def invalid(message: str, field: str | None = None) -> CatalogError:
    return CatalogError(400, message, field)


def missing(message: str) -> CatalogError:
    return CatalogError(404, message)


def conflict(message: str, field: str | None = None) -> CatalogError:
    return CatalogError(409, message, field)


def fetch_row(conn: Connection, table: Table, row_id: int, message: str,
              *, lock: bool = False) -> dict[str, Any]:
    """The row with ``row_id`` or a 404 ``CatalogError`` with ``message``."""
    query = select(table).where(table.c.id == row_id)
    if lock:
        query = query.with_for_update()
    row = conn.execute(query).mappings().first()
    if row is None:
        raise missing(message)
    return dict(row)


def unknown_ids(conn: Connection, table: Table, ids: Iterable[int]) -> list[int]:
    wanted = sorted(set(ids))
    if not wanted:
        return []
    found = set(conn.execute(select(table.c.id).where(table.c.id.in_(wanted))).scalars())
    return [i for i in wanted if i not in found]


def name_taken(conn: Connection, table: Table, column: str, value: str,
               except_id: int | None = None) -> bool:
    query = select(table.c.id).where(table.c[column] == value)
    if except_id is not None:
        query = query.where(table.c.id != except_id)
    return conn.execute(query.limit(1)).first() is not None


def _all(conn: Connection, table: Table, *order: Any) -> list[dict[str, Any]]:
    return [dict(row) for row in conn.execute(select(table).order_by(*order)).mappings()]


def load_catalog(conn: Connection) -> dict[str, Any]:
    """Every catalog row, as plain dicts keyed for view assembly."""
    s = schema
    users = s.users
    access = conn.execute(
        select(s.user_channel_access, users.c.username, users.c.email)
        .outerjoin(users, users.c.id == s.user_channel_access.c.user_id)
        .order_by(s.user_channel_access.c.id)
    ).mappings()
    return {
        "groups": {g["id"]: g for g in _all(conn, s.groups, s.groups.c.id)},
        "user_channels": _all(conn, s.user_channels, s.user_channels.c.name, s.user_channels.c.id),
        "access": [dict(row) for row in access],
        "channels": _all(conn, s.channels, s.channels.c.id),
        "channel_multipliers": _all(conn, s.channel_group_multipliers,
                                    s.channel_group_multipliers.c.id),
        "models": {m["id"]: m for m in _all(conn, s.models, s.models.c.model_name)},
        "configs": _all(conn, s.channel_models, s.channel_models.c.model_id,
                        s.channel_models.c.upstream_model_name, s.channel_models.c.id),
        "config_multipliers": _all(conn, s.channel_model_group_multipliers,
                                   s.channel_model_group_multipliers.c.id),
    }
