"""What model sync and price sync read and write (console contract §5.10).

Sync needs of a channel only where its upstream is (URL, key), its name for the result, and
its schedule; those come out as frozen ``SyncChannel`` rows.  Applying a model list
ensures a global model per name and an enabled config per (channel, model, upstream name) --
an existing model is never changed, a disabled config is enabled -- all inside the caller's
transaction, so one channel's apply is atomic.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.engine import Connection

from gateway.store import schema
from gateway.store.catalog_admin import fetch_row
from gateway.store.channels import NOT_FOUND as CHANNEL_NOT_FOUND
from gateway.store.models import find_or_create_model

#: names per ``IN (...)`` list (SQLite caps the number of bound parameters)
CHUNK = 500


@dataclass(frozen=True)
class SyncChannel:
    """The columns of a channel that model and price sync use."""

    id: int
    name: str
    base_url: str
    api_key: str | None
    price_sync_cron: str
    price_sync_last_at: datetime | None
    created_at: datetime


@dataclass(frozen=True)
class WantedConfig:
    """One model a channel should serve: the global name, the upstream's, its provider."""

    model_name: str
    upstream_model_name: str
    provider: str


def _sync_channel(row: Mapping[Any, Any]) -> SyncChannel:
    return SyncChannel(id=row["id"], name=row["name"], base_url=row["base_url"],
                       api_key=row["api_key"], price_sync_cron=row["price_sync_cron"] or "",
                       price_sync_last_at=row["price_sync_last_at"],
                       created_at=row["created_at"])


def channel(conn: Connection, channel_id: int) -> SyncChannel:
    """The channel, or a 404 ``CatalogError``."""
    return _sync_channel(fetch_row(conn, schema.channels, channel_id, CHANNEL_NOT_FOUND))


def channels_to_sync(conn: Connection, channel_ids: Sequence[int]) -> list[SyncChannel]:
    """The channels of ``channel_ids`` (those that exist), or every enabled one when empty."""
    ch = schema.channels
    query = select(ch).order_by(ch.c.id)
    query = query.where(ch.c.id.in_(channel_ids)) if channel_ids else query.where(
        ch.c.enabled.is_(True))
    return [_sync_channel(row) for row in conn.execute(query).mappings()]


def price_scheduled_channels(conn: Connection) -> list[SyncChannel]:
    """Enabled channels with scheduled price sync on, by id."""
    ch = schema.channels
    rows = conn.execute(select(ch).where(ch.c.enabled.is_(True),
                                         ch.c.price_sync_enabled.is_(True)).order_by(ch.c.id))
    return [_sync_channel(row) for row in rows.mappings()]


def stamp_price_sync(conn: Connection, channel_id: int, now: datetime) -> None:
    """A scheduled price sync of the channel was attempted at ``now``."""
    ch = schema.channels
    conn.execute(update(ch).where(ch.c.id == channel_id).values(price_sync_last_at=now))


def existing_model_names(conn: Connection, names: Sequence[str]) -> set[str]:
    """Which of ``names`` are global models already."""
    models = schema.models
    found: set[str] = set()
    for start in range(0, len(names), CHUNK):
        chunk = names[start:start + CHUNK]
        found.update(conn.execute(select(models.c.model_name).where(
            models.c.model_name.in_(chunk))).scalars())
    return found


def configured_model_names(conn: Connection, channel_id: int) -> set[str]:
    """Global names of the models the channel has a config for."""
    cm, models = schema.channel_models, schema.models
    rows = conn.execute(select(models.c.model_name).select_from(
        cm.join(models, models.c.id == cm.c.model_id)).where(cm.c.channel_id == channel_id))
    return {row[0] for row in rows}


def ensure_configs(conn: Connection, channel_id: int, wanted: Sequence[WantedConfig],
                   now: datetime) -> tuple[int, int]:
    """Ensure model + enabled config per wanted entry; ``(created, updated)`` configs."""
    fetch_row(conn, schema.channels, channel_id, CHANNEL_NOT_FOUND, lock=True)
    cm = schema.channel_models
    created = updated = 0
    for item in wanted:
        model = find_or_create_model(conn, item.model_name, item.provider, "", now)
        found = conn.execute(select(cm.c.id, cm.c.enabled).where(
            cm.c.channel_id == channel_id, cm.c.model_id == model["id"],
            cm.c.upstream_model_name == item.upstream_model_name)).first()
        if found is None:
            conn.execute(cm.insert().values(
                channel_id=channel_id, model_id=model["id"],
                upstream_model_name=item.upstream_model_name,
                enabled=True, created_at=now, updated_at=now))
            created += 1
        elif not found.enabled:
            conn.execute(update(cm).where(cm.c.id == found.id).values(enabled=True,
                                                                      updated_at=now))
            updated += 1
    return created, updated
