"""Composition root: builds every component from options, in dependency order.

``Lockgate.open()`` is used by the twistd service and by tests alike, so tests exercise the real
wiring (in-memory or temporary databases, real resources).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from twisted.internet.defer import Deferred, ensureDeferred
from twisted.logger import Logger
from twisted.web.resource import Resource

from console.context import ConsoleContext
from console.services.catalog.price_schedule import PriceSyncScheduler
from console.services.identity.passwords import Passwords
from console.services.identity.sessions import Sessions
from console.services.identity.throttle import Throttle
from gateway.assistant.run_service import RunService
from gateway.catalog.cache import CatalogCache
from gateway.catalog.key_cache import KeyCache
from gateway.client_ip import ClientAddress, parse_networks
from gateway.context import GatewayContext
from gateway.invalidation import USERS, Invalidation
from gateway.jobs.channel_probe import ChannelProbe
from gateway.jobs.monitors import MonitorRunner, MonitorScheduler
from gateway.jobs.order_expiry import OrderExpiry
from gateway.jobs.retention import LogRetention
from gateway.keys import KeyHasher
from gateway.observability.metrics import GatewayMetrics
from gateway.observability.tracing import Tracing
from gateway.session_tokens import TokenCodec
from gateway.settings.live import LiveSettings
from gateway.settings.store import Settings
from gateway.state.memory import MemoryState
from gateway.state.protocol import SharedState
from gateway.store import migrate
from gateway.store.pool import DBRunner, make_engine
from gateway.v1.resource import GatewayResource
from gateway.v1.task_routes import TaskRoutes
from gateway.v1.tasks.poller import TaskPoller
from tap.assistant_wiring import open_assistant
from tap.gateway_wiring import build_gateway
from tap.metrics_wiring import open_metrics, watch
from tap.root import build_root
from tap.secrets import Secrets

log = Logger()


@dataclass
class Lockgate:
    reactor: Any
    db: DBRunner
    state: SharedState
    ctx: ConsoleContext
    root: Resource
    gateway: GatewayContext
    #: closes unpaid top-up orders after payment_order_ttl_minutes
    order_expiry: OrderExpiry | None = None
    #: deletes usage logs past log_retention_days
    retention: LogRetention | None = None
    #: status monitor scheduler and channel probes (twisted services, started here)
    background: tuple[Any, ...] = ()
    #: drives async tasks (video, compatible) to an end state; stopped on close
    tasks: TaskPoller | None = None
    #: the metric families (only when metrics are exposed: ``--metrics-listen``)
    metrics: GatewayMetrics | None = None
    #: assistant runs in the background (their leases, sweeps and stop messages)
    assistant: RunService | None = None

    @classmethod
    def open(
        cls,
        reactor: Any,
        *,
        database: str,
        secrets: Secrets,
        state: SharedState | None = None,
        trusted_proxies: str = "",
        db_threads: int | None = None,
        run_migrations: bool = True,
        passwords: Passwords | None = None,
        clock: Any = None,
        node_name: str | None = None,
        metrics: bool = False,
        tracing: Tracing | None = None,
    ) -> Lockgate:
        """Start the database side (blocking: runs before any listener) and wire the app."""
        clock = clock if clock is not None else reactor
        engine, threads = make_engine(database, db_threads)
        if run_migrations:
            migrate.upgrade(engine)
        db = DBRunner(reactor, engine, threads)
        db.start()
        state = state if state is not None else MemoryState(clock)
        live = LiveSettings(db, state, Settings())
        live.load_blocking()
        live.listen()
        addresses = ClientAddress(parse_networks(trusted_proxies.split(",")))
        tokens = TokenCodec(secrets.jwt_key, clock)
        passwords = passwords or Passwords(reactor)
        passwords.start()
        invalidation = Invalidation(state)
        catalog = CatalogCache(db)
        catalog.load_blocking()
        catalog.listen(invalidation)
        keys = KeyCache(db, clock)
        keys.listen(invalidation)
        ctx = ConsoleContext(
            reactor=reactor, clock=clock, db=db, state=state, live_settings=live, tokens=tokens,
            passwords=passwords, addresses=addresses, throttle=Throttle(state, addresses),
            sessions=Sessions(db, tokens), invalidation=invalidation,
            key_hasher=KeyHasher(secrets.api_key_hmac_key), catalog=catalog, keys=keys,
            node_name=(node_name or "").strip(),
        )
        families = open_metrics(catalog) if metrics else None
        gateway = build_gateway(ctx, metrics=families, tracing=tracing)
        tasks = TaskPoller(gateway, node=ctx.node_name or f"pid{os.getpid()}",
                           announce_user=lambda user_id: invalidation.announce(
                               USERS, str(user_id).encode()))
        resource = GatewayResource(gateway, fallback=TaskRoutes(tasks).match)
        assistant, assistant_mounts = open_assistant(ctx, gateway)
        root = build_root(ctx, {b"v1": resource, b"v1beta": resource}, assistant_mounts)
        order_expiry = OrderExpiry(db, clock)
        order_expiry.start()
        retention = LogRetention(db, live.settings, clock)
        retention.start()
        background = (
            MonitorScheduler(MonitorRunner(reactor, clock, db, lambda: live.settings), clock,
                             db, state, lambda: live.settings),
            ChannelProbe(reactor, clock, db, state, invalidation, lambda: live.settings,
                         on_recovered=gateway.health.reset),
            PriceSyncScheduler(ctx),
        )
        for service in background:
            service.startService()
        tasks.start()
        if families is not None:
            watch(families, gateway, tasks, state)
        return cls(reactor=reactor, db=db, state=state, ctx=ctx, root=root, gateway=gateway,
                   order_expiry=order_expiry, retention=retention, background=background,
                   tasks=tasks, metrics=families, assistant=assistant)

    async def _close_gateway(self) -> None:
        if self.assistant is not None:
            await self.assistant.stop_all()
        if self.tasks is not None:
            await self.tasks.stop()
        await self.gateway.settler.flush()
        await self.gateway.health.flush()
        await self.gateway.wallets.stop()
        await self.gateway.upstream.close()
        if self.gateway.tracing is not None:
            await self.gateway.tracing.close(self.reactor)

    def close(self) -> Deferred[None]:
        if self.order_expiry is not None:
            self.order_expiry.stop()
        if self.retention is not None:
            self.retention.stop()
        for service in self.background:
            service.stopService()
        d0 = ensureDeferred(self._close_gateway())
        d0.addErrback(lambda f: log.failure("closing the gateway failed", f))
        self.ctx.live_settings.close()
        self.ctx.invalidation.close()
        self.ctx.passwords.stop()
        d0.addBoth(lambda _: self.state.stop())
        d0.addBoth(lambda _: self.db.stop())
        return d0
