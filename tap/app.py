"""Composition root: builds every component from options, in dependency order.

``Lockgate.open()`` is used by the twistd service and by tests alike, so tests exercise the real
wiring (in-memory or temporary databases, real resources).  Every long-lived piece is a child
of ``Lockgate.services`` (``tap.ordered_services``), added -- and started -- as it is built,
so each one stops by itself, in reverse order, after everything built on it: the jobs and the
task poller, then the settler's flush, the wallets, the upstream client, the caches'
subscriptions, the shared state and last the database.  ``tap.service`` puts this tree first
under the process's service, with the listeners and the drain after it, so that a stop drains,
closes the listeners and only then closes the app.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from twisted.internet.defer import Deferred
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
from gateway.jobs.sandbox_storage import SandboxStorageJob
from gateway.keys import KeyHasher
from gateway.ledger.wallet import WalletBook
from gateway.links.node import AgentLinks
from gateway.observability.metrics import GatewayMetrics
from gateway.observability.tracing import Tracing
from gateway.sandboxes.settlement import settle_task_result
from gateway.session_tokens import TokenCodec
from gateway.settings.live import LiveSettings
from gateway.settings.store import Settings
from gateway.state.memory import MemoryState
from gateway.state.protocol import SharedState
from gateway.store import migrate
from gateway.store.pool import DBRunner, make_engine
from gateway.studio.control_loop import ControlLoop
from gateway.user_cache import UserCache
from gateway.v1.resource import GatewayResource
from gateway.v1.task_routes import TaskRoutes
from gateway.v1.tasks.poller import TaskPoller
from tap.assistant_wiring import open_assistant
from tap.gateway_wiring import build_gateway
from tap.metrics_wiring import open_metrics, watch
from tap.ordered_services import OrderedServices, Piece
from tap.root import build_root
from tap.secrets import Secrets
from tap.studio_wiring import open_studio_loop


@dataclass
class Lockgate:
    reactor: Any
    db: DBRunner
    state: SharedState
    ctx: ConsoleContext
    root: Resource
    gateway: GatewayContext
    #: every long-lived piece, in the order built; they stop in reverse (``close``)
    services: OrderedServices
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
    #: the studio control loop (agents contract §4.8; one scheduling node per cluster)
    studio_loop: ControlLoop | None = None

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
        wallets: WalletBook | None = None,
    ) -> Lockgate:
        """Start the database side (blocking: runs before any listener) and wire the app,
        starting each piece as it is added to ``services``."""
        clock = clock if clock is not None else reactor
        services = OrderedServices()
        services.startService()
        engine, threads = make_engine(database, db_threads)
        if run_migrations:
            migrate.upgrade(engine)
        db = DBRunner(reactor, engine, threads)
        Piece("database", start=db.start, stop=db.stop).setServiceParent(services)
        state = state if state is not None else MemoryState(clock)
        Piece("shared state", stop=state.stop).setServiceParent(services)
        live = LiveSettings(db, state, Settings())
        live.load_blocking()
        Piece("live settings", start=live.listen, stop=live.close).setServiceParent(services)
        addresses = ClientAddress(parse_networks(trusted_proxies.split(",")))
        tokens = TokenCodec(secrets.jwt_key, clock)
        passwords = passwords or Passwords(reactor)
        Piece("password hashing", start=passwords.start,
              stop=passwords.stop).setServiceParent(services)
        invalidation = Invalidation(state)
        Piece("invalidation", stop=invalidation.close).setServiceParent(services)
        catalog = CatalogCache(db)
        catalog.load_blocking()
        catalog.listen(invalidation)
        keys = KeyCache(db, clock)
        keys.listen(invalidation)
        ctx = ConsoleContext(
            reactor=reactor, clock=clock, db=db, state=state, live_settings=live, tokens=tokens,
            passwords=passwords, addresses=addresses, throttle=Throttle(state, addresses),
            sessions=Sessions(db, tokens, UserCache(db, invalidation, clock)),
            invalidation=invalidation,
            key_hasher=KeyHasher(secrets.api_key_hmac_key), catalog=catalog, keys=keys,
            node_name=(node_name or "").strip(),
            links=AgentLinks(db, state, clock, (node_name or "").strip()),
        )
        families = open_metrics(catalog) if metrics else None
        gateway = build_gateway(ctx, metrics=families, tracing=tracing, wallets=wallets)
        gateway_pieces(reactor, gateway).setServiceParent(services)
        tasks = TaskPoller(gateway, node=ctx.node_name or f"pid{os.getpid()}",
                           announce_user=lambda user_id: invalidation.announce(
                               USERS, str(user_id).encode()))
        resource = GatewayResource(gateway, fallback=TaskRoutes(tasks).match)
        assistant, assistant_mounts = open_assistant(ctx, gateway)
        root = build_root(ctx, {b"v1": resource, b"v1beta": resource}, assistant_mounts)
        Piece("task poller", start=tasks.start, stop=tasks.stop).setServiceParent(services)
        # runs stop (their model calls settled, their leases let go) before the task poller
        Piece("assistant runs", start=assistant.start,
              stop=assistant.stop_all).setServiceParent(services)
        order_expiry = OrderExpiry(db, clock)
        Piece("order expiry", start=order_expiry.start,
              stop=order_expiry.stop).setServiceParent(services)
        retention = LogRetention(db, live.settings, clock)
        Piece("log retention", start=retention.start,
              stop=retention.stop).setServiceParent(services)
        background = (
            MonitorScheduler(MonitorRunner(reactor, clock, db, lambda: live.settings), clock,
                             db, state, lambda: live.settings),
            ChannelProbe(reactor, clock, db, state, invalidation, lambda: live.settings,
                         on_recovered=gateway.health.reset),
            PriceSyncScheduler(ctx),
            SandboxStorageJob(reactor, clock, db, state, invalidation, lambda: live.settings),
        )
        for service in background:
            service.setServiceParent(services)
        # built after the assistant runs, so it stops (no new starts) before they do
        studio_loop = open_studio_loop(reactor, clock, db, assistant, ctx.node_name)
        studio_loop.setServiceParent(services)
        assert ctx.links is not None
        Piece("agent links", start=ctx.links.start, stop=ctx.links.stop).setServiceParent(services)
        ctx.links.tasks.result_hooks.append(
            lambda task: settle_task_result(db, invalidation, task, ctx.now()))
        if families is not None:
            watch(families, gateway, tasks, state)
        return cls(reactor=reactor, db=db, state=state, ctx=ctx, root=root, gateway=gateway,
                   services=services, order_expiry=order_expiry, retention=retention,
                   background=background, tasks=tasks, metrics=families, assistant=assistant,
                   studio_loop=studio_loop)

    def close(self) -> Deferred[None]:
        """Stop every piece, the last built first (see the module docstring)."""
        return self.services.stopService()


def gateway_pieces(reactor: Any, gateway: GatewayContext) -> OrderedServices:
    """The /v1 data plane's pieces that outlive a request, in the order they stop in
    reverse: queued settlements and health counts are written before the wallets close, and
    the wallets before the upstream client and the trace exporter."""
    pieces = OrderedServices()
    pieces.setName("data plane")

    async def close_upstream() -> None:
        await gateway.upstream.close()
        if gateway.tracing is not None:
            await gateway.tracing.close(reactor)

    async def flush() -> None:
        await gateway.settler.flush()
        await gateway.health.flush()

    Piece("upstream client", stop=close_upstream).setServiceParent(pieces)
    Piece("wallets", stop=gateway.wallets.stop).setServiceParent(pieces)
    Piece("settler", stop=flush).setServiceParent(pieces)
    return pieces
