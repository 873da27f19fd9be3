"""Builds the /v1 data plane from the shared pieces the console also uses."""

from __future__ import annotations

from console.context import ConsoleContext
from gateway.channels.health import ChannelHealth
from gateway.channels.health_journal import HealthJournal
from gateway.channels.http import UpstreamClient
from gateway.channels.safe_connect import LivePolicy
from gateway.context import GatewayContext, GatewayTimeouts
from gateway.invalidation import CATALOG, EVERYTHING, KEYS, USERS
from gateway.ledger.settlement import Settler
from gateway.ledger.shared_wallet import SharedWallets, needs_shared_wallets
from gateway.ledger.wallet import WalletBook, Wallets
from gateway.limits import GatewayLimiter
from gateway.observability.metrics import GatewayMetrics
from gateway.observability.tracing import Tracing
from gateway.store.channel_upkeep import mark_auto_disabled


def build_gateway(ctx: ConsoleContext, *, timeouts: GatewayTimeouts | None = None,
                  settle_interval: float = 0.02,
                  metrics: GatewayMetrics | None = None,
                  tracing: Tracing | None = None,
                  wallets: WalletBook | None = None) -> GatewayContext:
    if wallets is not None:
        pass  # given by the caller (a --workers process: the supervisor's book)
    elif needs_shared_wallets(ctx.state):
        # several processes share this state (Redis): reservations must be shared too
        wallets = SharedWallets(ctx.db, ctx.state, ctx.clock)
        wallets.start()
    else:
        wallets = Wallets(ctx.db)
    settler = Settler(ctx.db, ctx.clock, wallets, batch_interval=settle_interval)
    settler.metrics = metrics

    async def auto_disable(channel_id: int, reason: str) -> None:
        await ctx.db.transaction(mark_auto_disabled, channel_id, reason, ctx.now())
        await ctx.invalidation.announce(CATALOG)

    async def users_changed(detail: bytes) -> None:
        if detail.isdigit():
            wallets.forget_user(int(detail))
        elif detail == EVERYTHING:
            wallets.forget_all_users()

    async def keys_changed(_detail: bytes) -> None:
        wallets.forget_all_keys()

    ctx.invalidation.on(USERS, users_changed)
    ctx.invalidation.on(KEYS, keys_changed)
    def persisted_failures(channel_id: int) -> int:
        channel = ctx.catalog.snapshot.channels.get(channel_id)
        return channel.consecutive_failures if channel is not None else 0

    health = ChannelHealth(ctx.clock, on_auto_disable=auto_disable,
                           journal=HealthJournal(ctx.db, ctx.now),
                           persisted_failures=persisted_failures)

    async def catalog_changed(_detail: bytes) -> None:
        # a channel re-enabled or recovered on any node must be routable here again too
        # (the catalog cache registered first, so its snapshot is already the new one)
        for channel in ctx.catalog.snapshot.channels.values():
            if channel.auto_disabled_at is None and health.is_auto_disabled(channel.id):
                health.reset(channel.id)

    ctx.invalidation.on(CATALOG, catalog_changed)
    gateway = GatewayContext(
        reactor=ctx.reactor, clock=ctx.clock, db=ctx.db, state=ctx.state,
        settings=ctx.settings, catalog=ctx.catalog, keys=ctx.keys, key_hasher=ctx.key_hasher,
        tokens=ctx.tokens, users=ctx.sessions.users, wallets=wallets,
        settler=settler,
        upstream=UpstreamClient(ctx.reactor, clock=ctx.clock, max_persistent_per_host=256,
                                policy=LivePolicy(ctx.settings)),
        health=health,
        limiter=GatewayLimiter(ctx.state, ctx.settings), addresses=ctx.addresses,
        timeouts=timeouts or GatewayTimeouts(), metrics=metrics, tracing=tracing,
    )
    return gateway
