"""Scheduled price sync (console contract §5.10): channels with ``price_sync_enabled``.

Every minute (on the injected clock) one node -- whoever takes the round's claim in shared
state -- looks at each enabled channel with price sync on, and when its cron has fired since
``price_sync_last_at`` (or the channel's creation), reads the upstream's prices (format
``auto``) and writes them into the **global** models that already exist.  Unlike the manual
apply it does not create models: a schedule should keep the prices of served models current,
not import an upstream's whole list.  ``price_sync_last_at`` is stamped after every attempt, so
a failing upstream is retried at the next firing, not every minute.  ``stopService`` cancels a
round in flight.
"""

from __future__ import annotations

from collections.abc import Coroutine
from datetime import datetime
from typing import Any

from twisted.logger import Logger

from console.context import ConsoleContext
from console.http import ApiError
from console.services.catalog.price_sync import apply_prices, fetch_items, price_values
from gateway.invalidation import CATALOG
from gateway.jobs.cron import CronError
from gateway.jobs.periodic import RoundService
from gateway.store.channel_sync import SyncChannel, price_scheduled_channels, stamp_price_sync
from gateway.store.channels import DEFAULT_CRON
from gateway.sync.schedule import next_fire

log = Logger()

TICK_SECONDS = 60.0
CLAIM_KEY = "lockgate:price-sync:round"


def is_due(channel: SyncChannel, now: datetime) -> bool:
    since = channel.price_sync_last_at or channel.created_at
    try:
        fires = next_fire(channel.price_sync_cron or DEFAULT_CRON, since)
    except CronError:
        return False
    return fires is not None and fires <= now


class PriceSyncScheduler(RoundService):
    failure_message = "scheduled price sync failed"

    def __init__(self, ctx: ConsoleContext, *, tick_seconds: float = TICK_SECONDS) -> None:
        super().__init__(ctx.reactor, ctx.clock, tick_seconds)
        self._ctx = ctx

    def start_round(self) -> Coroutine[Any, Any, None]:
        return self._round()

    async def _round(self) -> None:
        ctx = self._ctx
        if not await ctx.state.claim(CLAIM_KEY, max(1, int(self._tick_seconds) - 1)):
            return
        now = ctx.now()
        channels = [c for c in await ctx.db.transaction(price_scheduled_channels) if is_due(c, now)]
        changed = False
        for channel in channels:
            try:
                _source, items = await fetch_items(ctx, channel, "auto", None)
                entries = price_values([item.wire() for item in items])
                _created, updated = await ctx.db.transaction(apply_prices, entries, now,
                                                             create=False)
                changed = changed or updated > 0
            except ApiError as exc:
                log.warn("scheduled price sync of channel {id} failed: {error}",
                         id=channel.id, error=exc.message)
            await ctx.db.transaction(stamp_price_sync, channel.id, now)
        if changed:
            await ctx.invalidation.announce(CATALOG)
