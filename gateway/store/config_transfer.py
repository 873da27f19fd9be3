"""The tables a configuration backup reads and a restore writes (console contract §5.5).

A backup reads user channels, channels, models, and -- when those sections are chosen -- the
settings and the channel-model configs, all in one transaction.  A restore applies a plan the
console validated, in ONE transaction, in the order settings -> user channels -> channels ->
models -> prices -> configs: records are matched by name (channels by name + base URL) and
overwritten, records absent from the plan stay, nothing is deleted.  A reference found
neither in the plan nor in the database raises ``ImportRefused`` and rolls the whole restore
back.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Table, select, update
from sqlalchemy.engine import Connection

from gateway.store import schema
from gateway.store.settings_rows import write_settings


class ImportRefused(Exception):
    """A record refers to something that exists neither in the file nor in the database."""


@dataclass(frozen=True)
class ConfigTables:
    """Rows for a backup, as dicts of their columns, each list in a stable order."""

    user_channels: list[dict[str, Any]]
    channels: list[dict[str, Any]]
    #: by model name
    models: list[dict[str, Any]]
    #: empty unless asked for; by key
    settings: list[dict[str, Any]]
    #: empty unless asked for
    configs: list[dict[str, Any]]


def _rows(conn: Connection, table: Table, *order: Any) -> list[dict[str, Any]]:
    return [dict(r) for r in conn.execute(select(table).order_by(*order)).mappings()]


def read_config_tables(conn: Connection, *, settings: bool, configs: bool) -> ConfigTables:
    s = schema
    return ConfigTables(
        user_channels=_rows(conn, s.user_channels, s.user_channels.c.id),
        channels=_rows(conn, s.channels, s.channels.c.id),
        models=_rows(conn, s.models, s.models.c.model_name),
        settings=_rows(conn, s.settings, s.settings.c.key) if settings else [],
        configs=_rows(conn, s.channel_models, s.channel_models.c.id) if configs else [],
    )


def _upsert(conn: Connection, table: Table, match: Any, values: dict[str, Any],
            now: datetime) -> int:
    row_id = conn.execute(select(table.c.id).where(match).order_by(table.c.id).limit(1)).scalar()
    if row_id is None:
        key = conn.execute(table.insert().values(**values, created_at=now,
                                                 updated_at=now)).inserted_primary_key
        assert key is not None
        return int(key[0])
    conn.execute(update(table).where(table.c.id == row_id).values(**values, updated_at=now))
    return int(row_id)


def apply_config_plan(conn: Connection, plan: dict[str, Any], now: datetime) -> None:
    """Write a validated plan; raises ImportRefused (rolling everything back)."""
    s = schema
    write_settings(conn, plan["settings"], now)
    for values in plan["user_channels"]:
        _upsert(conn, s.user_channels, s.user_channels.c.name == values["name"], values, now)
    for item in plan["channels"]:
        values = dict(item["values"])
        values["user_channel_id"] = None
        if item["user_channel_name"]:
            values["user_channel_id"] = conn.execute(select(s.user_channels.c.id).where(
                s.user_channels.c.name == item["user_channel_name"])).scalar()
            if values["user_channel_id"] is None:
                raise ImportRefused("Referenced user channel was not found")
        match = (s.channels.c.name == values["name"]) & (
            s.channels.c.base_url == values["base_url"])
        _upsert(conn, s.channels, match, values, now)
    for values in plan["models"]:
        _upsert(conn, s.models, s.models.c.model_name == values["model_name"], values, now)
    for item in plan["prices"]:
        done = conn.execute(update(s.models).where(s.models.c.model_name == item["model_name"])
                            .values(**item["values"], updated_at=now)).rowcount
        if not done:
            raise ImportRefused("Model price references a model that was not found")
    for item in plan["configs"]:
        channel_id = conn.execute(select(s.channels.c.id).where(
            (s.channels.c.name == item["channel_name"])
            & (s.channels.c.base_url == item["channel_base_url"])).order_by(s.channels.c.id)
            .limit(1)).scalar()
        model_id = conn.execute(select(s.models.c.id).where(
            s.models.c.model_name == item["model_name"])).scalar()
        if channel_id is None or model_id is None:
            raise ImportRefused("Model config references a channel or model that was not found")
        cm = s.channel_models
        upstream = item["upstream_model_name"] or item["model_name"]
        values = {**item["values"], "channel_id": channel_id, "model_id": model_id,
                  "upstream_model_name": upstream}
        match = (cm.c.channel_id == channel_id) & (cm.c.model_id == model_id) & (
            cm.c.upstream_model_name == upstream)
        _upsert(conn, cm, match, values, now)
