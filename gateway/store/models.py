"""Admin queries on global models (console contract §5.9).

Values arrive validated and normalised (prices in nano-units, tiers and the video config in
their canonical JSON form).  Names are unique: a clash is a 409, never a database error.
Deleting a model removes its channel configs and their multipliers (foreign keys cascade).

``find_or_create_model`` serves config creation by name: it creates a missing model but never
changes an existing one (weakness 18 -- creating a config must not re-enable or rename a model).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.engine import Connection

from gateway.store import schema
from gateway.store.catalog_admin import conflict, fetch_row, name_taken
from gateway.store.meta_models import meta_name_taken

NOT_FOUND = "Model not found"


def create_model(conn: Connection, values: dict[str, Any], now: datetime) -> int:
    if name_taken(conn, schema.models, "model_name", values["model_name"]) or \
            meta_name_taken(conn, values["model_name"]):
        raise conflict("Model already exists", "model_name")
    inserted = conn.execute(
        schema.models.insert().values(**values, created_at=now, updated_at=now)
    ).inserted_primary_key
    assert inserted is not None
    return int(inserted[0])


def update_model(conn: Connection, model_id: int, values: dict[str, Any],
                 now: datetime) -> int:
    table = schema.models
    fetch_row(conn, table, model_id, NOT_FOUND, lock=True)
    if "model_name" in values and (
            name_taken(conn, table, "model_name", values["model_name"], except_id=model_id)
            or meta_name_taken(conn, values["model_name"])):
        raise conflict("Model already exists", "model_name")
    conn.execute(update(table).where(table.c.id == model_id).values(**values, updated_at=now))
    return model_id


def delete_model(conn: Connection, model_id: int) -> None:
    table = schema.models
    fetch_row(conn, table, model_id, NOT_FOUND, lock=True)
    conn.execute(table.delete().where(table.c.id == model_id))


def model_by_name(conn: Connection, name: str) -> dict[str, Any] | None:
    table = schema.models
    row = conn.execute(select(table).where(table.c.model_name == name)).mappings().first()
    return dict(row) if row else None


def find_or_create_model(conn: Connection, name: str, provider: str | None,
                         icon: str | None, now: datetime) -> dict[str, Any]:
    """The model named ``name``; created (enabled, zero prices) only when absent."""
    found = model_by_name(conn, name)
    if found is not None:
        return found
    model_id = create_model(conn, {
        "model_name": name, "provider": provider or "custom", "provider_icon_url": icon or "",
        "enabled": True,
    }, now)
    return fetch_row(conn, schema.models, model_id, NOT_FOUND)
