"""Admin queries on channel-model configs (console contract §5.8).

A config binds a global model to an upstream channel under an upstream model name and may
override five prices (null = inherit the global price).  Creating a config by ``model_name``
creates a missing global model in the same transaction but never touches an existing one
(weakness 18).  ``upstream_model_name`` defaults to the model name -- on PUT too, as in the
origin: an update without it resets it to the model name.  (channel, model, upstream name) is
unique: a duplicate is a 409.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.engine import Connection

from gateway.store import schema
from gateway.store.catalog_admin import conflict, fetch_row, invalid
from gateway.store.channels import NOT_FOUND as CHANNEL_NOT_FOUND
from gateway.store.models import NOT_FOUND as MODEL_NOT_FOUND
from gateway.store.models import find_or_create_model, model_by_name
from gateway.store.schema import OVERRIDE_PRICE_NAMES

NOT_FOUND = "Model config not found"


def _existing_model(conn: Connection, model_id: int | None,
                    model_name: str | None) -> dict[str, Any] | None:
    if model_id is not None:
        row = conn.execute(select(schema.models).where(schema.models.c.id == model_id)
                           ).mappings().first()
        if row is None:
            raise invalid(MODEL_NOT_FOUND, "model_id")
        if model_name is not None and model_name != row["model_name"]:
            raise invalid("model_name does not match model_id", "model_name")
        return dict(row)
    if model_name is not None:
        return model_by_name(conn, model_name)
    return None


def _check_unique(conn: Connection, channel_id: int, model_id: int, upstream: str,
                  except_id: int | None = None) -> None:
    cm = schema.channel_models
    query = select(cm.c.id).where(cm.c.channel_id == channel_id, cm.c.model_id == model_id,
                                  cm.c.upstream_model_name == upstream)
    if except_id is not None:
        query = query.where(cm.c.id != except_id)
    if conn.execute(query.limit(1)).first():
        raise conflict("Model config already exists", "upstream_model_name")


def create_config(conn: Connection, channel_id: int, model_id: int | None,
                  model_name: str | None, new_model: dict[str, Any], values: dict[str, Any],
                  now: datetime) -> int:
    fetch_row(conn, schema.channels, channel_id, CHANNEL_NOT_FOUND, lock=True)
    if model_id is None and model_name is None:
        raise invalid("Model is required", "model_id")
    model = _existing_model(conn, model_id, model_name)
    if model is None:
        assert model_name is not None
        model = find_or_create_model(conn, model_name, new_model.get("provider"),
                                     new_model.get("provider_icon_url"), now)
    row: dict[str, Any] = {f"{name}_nanos": None for name in OVERRIDE_PRICE_NAMES}
    row.update(enabled=True, upstream_model_name=model["model_name"])
    row.update(values)
    _check_unique(conn, channel_id, model["id"], row["upstream_model_name"])
    inserted = conn.execute(schema.channel_models.insert().values(
        **row, channel_id=channel_id, model_id=model["id"], created_at=now, updated_at=now)
    ).inserted_primary_key
    assert inserted is not None
    return int(inserted[0])


def update_config(conn: Connection, config_id: int, model_id: int | None,
                  model_name: str | None, values: dict[str, Any], now: datetime) -> int:
    cm = schema.channel_models
    config = fetch_row(conn, cm, config_id, NOT_FOUND, lock=True)
    model = _existing_model(conn, model_id, model_name)
    if model_id is None and model_name is not None and model is None:
        raise invalid(MODEL_NOT_FOUND, "model_name")
    if model is None:
        model = fetch_row(conn, schema.models, config["model_id"], MODEL_NOT_FOUND)
    changes = dict(values)
    changes["model_id"] = model["id"]
    changes.setdefault("upstream_model_name", model["model_name"])
    _check_unique(conn, config["channel_id"], model["id"], changes["upstream_model_name"],
                  except_id=config_id)
    conn.execute(update(cm).where(cm.c.id == config_id).values(**changes, updated_at=now))
    return config_id


def delete_config(conn: Connection, config_id: int) -> int:
    """Returns the channel id of the deleted config."""
    cm = schema.channel_models
    config = fetch_row(conn, cm, config_id, NOT_FOUND, lock=True)
    conn.execute(cm.delete().where(cm.c.id == config_id))
    return int(config["channel_id"])
