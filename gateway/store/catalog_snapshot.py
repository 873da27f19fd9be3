"""Reads every catalog table in one transaction and builds a ``CatalogSnapshot``.

The snapshot's frozen records (``gateway.catalog.snapshot``) are the typed rows: the catalog
cache never sees a database row, only what this read made of it.

On PostgreSQL the transaction is REPEATABLE READ so all the SELECTs see the same moment (READ
COMMITTED would let an admin write land between two of them); SQLite transactions already are.
"""

from __future__ import annotations

from collections import defaultdict
from decimal import Decimal
from typing import Any

from sqlalchemy import select
from sqlalchemy.engine import Connection
from twisted.logger import Logger

from gateway.billing.money import from_nanos
from gateway.billing.pricing import OVERRIDABLE, PRICE_NAMES, normalize_quota_type
from gateway.catalog.snapshot import (
    CatalogSnapshot,
    Channel,
    Group,
    Model,
    ModelConfig,
    UserChannel,
)
from gateway.metamodels.compiled import MetaModel, compile_meta
from gateway.store import schema

log = Logger()


def _multipliers(rows: Any, owner: str) -> dict[int, dict[int, Decimal]]:
    found: dict[int, dict[int, Decimal]] = defaultdict(dict)
    for row in rows:
        if row["multiplier_nanos"]:
            found[row[owner]][row["group_id"]] = from_nanos(row["multiplier_nanos"])
    return found


def load_catalog(conn: Connection) -> CatalogSnapshot:
    if conn.dialect.name == "postgresql":
        conn.exec_driver_sql("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
    s = schema
    groups = [Group(r["id"], r["name"], from_nanos(r["multiplier_nanos"]))
              for r in conn.execute(select(s.groups)).mappings()]
    grants_groups: dict[int, set[int]] = defaultdict(set)
    grants_users: dict[int, set[int]] = defaultdict(set)
    for r in conn.execute(select(s.user_channel_access)).mappings():
        if r["group_id"] is not None:
            grants_groups[r["user_channel_id"]].add(r["group_id"])
        if r["user_id"] is not None:
            grants_users[r["user_channel_id"]].add(r["user_id"])
    user_channels = [
        UserChannel(
            id=r["id"], name=r["name"], description=r["description"] or "",
            multiplier=from_nanos(r["multiplier_nanos"]),
            routing_algorithm=r["routing_algorithm"], enabled=bool(r["enabled"]),
            rate_limit_enabled=bool(r["rate_limit_enabled"]),
            rate_limit_requests_per_minute=r["rate_limit_requests_per_minute"],
            rate_limit_burst=r["rate_limit_burst"],
            allowed_group_ids=frozenset(grants_groups.get(r["id"], ())),
            allowed_user_ids=frozenset(grants_users.get(r["id"], ())),
        )
        for r in conn.execute(select(s.user_channels)).mappings()
    ]
    channel_mult = _multipliers(
        conn.execute(select(s.channel_group_multipliers)).mappings(), "channel_id")
    channels = [
        Channel(
            id=r["id"], user_channel_id=r["user_channel_id"], name=r["name"], type=r["type"],
            base_url=r["base_url"], api_key=r["api_key"] or "", priority=r["priority"],
            weight=r["weight"], enabled=bool(r["enabled"]),
            consecutive_failures=r["consecutive_failures"],
            auto_disabled_at=r["auto_disabled_at"],
            last_health_status=r["last_health_status"],
            group_multipliers=channel_mult.get(r["id"], {}),
        )
        for r in conn.execute(select(s.channels)).mappings()
    ]
    models = [
        Model(
            id=r["id"], model_name=r["model_name"], display_name=r["display_name"] or "",
            provider=r["provider"] or "custom", provider_icon_url=r["provider_icon_url"] or "",
            quota_type=normalize_quota_type(r["quota_type"]), enabled=bool(r["enabled"]),
            prices={name: from_nanos(r[f"{name}_nanos"] or 0) for name in PRICE_NAMES},
            tiers={name: r[f"{name}_tiers"] or [] for name in PRICE_NAMES},
            video_billing_config=r["video_billing_config"],
        )
        for r in conn.execute(select(s.models)).mappings()
    ]
    config_mult = _multipliers(
        conn.execute(select(s.channel_model_group_multipliers)).mappings(), "channel_model_id")
    configs = [
        ModelConfig(
            id=r["id"], channel_id=r["channel_id"], model_id=r["model_id"],
            upstream_model_name=r["upstream_model_name"] or "", enabled=bool(r["enabled"]),
            price_overrides={
                name: None if r[f"{name}_nanos"] is None else from_nanos(r[f"{name}_nanos"])
                for name in OVERRIDABLE},
            group_multipliers=config_mult.get(r["id"], {}),
        )
        for r in conn.execute(select(s.channel_models)).mappings()
    ]
    return CatalogSnapshot(groups=groups, user_channels=user_channels, channels=channels,
                           models=models, configs=configs, meta_models=_meta_models(conn))


def _meta_models(conn: Connection) -> list[MetaModel]:
    """The enabled meta models, their programs parsed (one whose source no longer parses is
    left out and logged: the admin routes never store one, so that is a hand-edited row)."""
    found: list[MetaModel] = []
    t = schema.meta_models
    for row in conn.execute(select(t).where(t.c.enabled.is_(True))).mappings():
        try:
            found.append(compile_meta(dict(row)))
        except ValueError as exc:
            log.error("meta model {name!r} left out: {reason}", name=row["model_name"],
                      reason=str(exc))
    return found
