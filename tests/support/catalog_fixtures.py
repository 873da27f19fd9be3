"""Builds catalog rows (groups, user channels, channels, models, configs, multipliers) for tests.

Rows are written straight into the database, then ``announce()`` tells the caches exactly as the
admin routes do after a write.
"""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal
from typing import Any

from sqlalchemy import Table, update

from gateway.billing.money import to_nanos
from gateway.invalidation import CATALOG, USERS
from gateway.store import schema


def nanos(value: str | int | Decimal) -> int:
    return to_nanos(Decimal(str(value)))


class CatalogBuilder:
    def __init__(self, ctx: Any) -> None:
        self.ctx = ctx

    async def _insert(self, table: Table, timestamps: bool = True, **values: Any) -> int:
        now = self.ctx.now()
        if timestamps:
            values.setdefault("created_at", now)
            values.setdefault("updated_at", now)
        else:
            values.setdefault("created_at", now)

        def run(conn: Any) -> int:
            key = conn.execute(table.insert().values(**values)).inserted_primary_key
            return int(key[0])

        return await self.ctx.db.transaction(run)

    async def set(self, table: Table, row_id: int, **values: Any) -> None:
        """Update one row and announce the catalog change (what an admin PUT does)."""
        def run(conn: Any) -> None:
            conn.execute(update(table).where(table.c.id == row_id).values(**values))

        await self.ctx.db.transaction(run)
        await self.announce()

    async def announce(self) -> None:
        await self.ctx.invalidation.announce(CATALOG)

    async def group(self, name: str, multiplier: str = "1") -> int:
        return await self._insert(schema.groups, name=name, multiplier_nanos=nanos(multiplier))

    async def membership(self, user_id: int, group_id: int,
                         expires_at: datetime | None = None) -> int:
        found = await self._insert(schema.group_memberships, user_id=user_id, group_id=group_id,
                                   expires_at=expires_at)
        await self.ctx.invalidation.announce(USERS, str(user_id).encode())
        return found

    async def user_channel(self, name: str, multiplier: str = "1", *, enabled: bool = True,
                           description: str = "", routing_algorithm: str = "priority") -> int:
        return await self._insert(
            schema.user_channels, name=name, multiplier_nanos=nanos(multiplier), enabled=enabled,
            description=description, routing_algorithm=routing_algorithm)

    async def grant(self, user_channel_id: int, *, group_id: int | None = None,
                    user_id: int | None = None) -> int:
        return await self._insert(schema.user_channel_access, timestamps=False,
                                  user_channel_id=user_channel_id, group_id=group_id,
                                  user_id=user_id)

    async def channel(self, user_channel_id: int | None, name: str, *, type: str = "compat",
                      base_url: str = "http://127.0.0.1:9", api_key: str = "up-key",
                      priority: int = 1, weight: int = 1, enabled: bool = True) -> int:
        return await self._insert(
            schema.channels, user_channel_id=user_channel_id, name=name, type=type,
            base_url=base_url, api_key=api_key, priority=priority, weight=weight,
            enabled=enabled)

    async def model(self, name: str, *, input: str = "0", output: str = "0",
                    cached_input: str = "0", quota_type: int = 0, enabled: bool = True,
                    provider: str = "custom", icon: str = "", video: Any = None,
                    **extra: Any) -> int:
        return await self._insert(
            schema.models, model_name=name, input_price_nanos=nanos(input),
            output_price_nanos=nanos(output), cached_input_price_nanos=nanos(cached_input),
            quota_type=quota_type, enabled=enabled, provider=provider, provider_icon_url=icon,
            video_billing_config=video, **extra)

    async def config(self, channel_id: int, model_id: int, *, upstream: str = "",
                     enabled: bool = True, **overrides: str | None) -> int:
        """``overrides`` are price names (``input_price="0.5"``); ``None`` inherits."""
        values = {f"{name}_nanos": None if value is None else nanos(value)
                  for name, value in overrides.items()}
        return await self._insert(
            schema.channel_models, channel_id=channel_id, model_id=model_id,
            upstream_model_name=upstream, enabled=enabled, **values)

    async def channel_multiplier(self, channel_id: int, group_id: int, multiplier: str) -> int:
        return await self._insert(schema.channel_group_multipliers, channel_id=channel_id,
                                  group_id=group_id, multiplier_nanos=nanos(multiplier))

    async def config_multiplier(self, config_id: int, group_id: int, multiplier: str) -> int:
        return await self._insert(schema.channel_model_group_multipliers,
                                  channel_model_id=config_id, group_id=group_id,
                                  multiplier_nanos=nanos(multiplier))

    async def simple(self, model: str = "fast-small", *, input: str = "0.3", output: str = "1.2",
                     uc_name: str = "standard", uc_multiplier: str = "1") -> dict[str, int]:
        """One user channel, one upstream channel, one model, one config; announced."""
        uc = await self.user_channel(uc_name, uc_multiplier)
        channel = await self.channel(uc, f"{uc_name}-up")
        model_id = await self.model(model, input=input, output=output)
        config = await self.config(channel, model_id)
        await self.announce()
        return {"user_channel": uc, "channel": channel, "model": model_id, "config": config}
