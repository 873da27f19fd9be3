"""Everything the /v1 data plane is given, built once by ``tap``.

The hot path reads only memory: settings, the catalog snapshot, key/user caches and wallets.
The database is reached through the key/user caches on a miss and through the settler's group
commit -- never once per request step.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from gateway.catalog.cache import CatalogCache
from gateway.catalog.key_cache import KeyCache
from gateway.channels.health import ChannelHealth
from gateway.channels.http import UpstreamClient
from gateway.client_ip import ClientAddress
from gateway.keys import KeyHasher
from gateway.ledger.settlement import Settler
from gateway.ledger.wallet import WalletBook
from gateway.limits import GatewayLimiter
from gateway.session_tokens import TokenCodec
from gateway.settings.store import Settings
from gateway.state.protocol import SharedState
from gateway.store.pool import DBRunner
from gateway.user_cache import UserCache
from gateway.v1.calls_in_flight import CallsInFlight

if TYPE_CHECKING:
    from gateway.observability.metrics import GatewayMetrics
    from gateway.observability.tracing import Tracing


@dataclass
class GatewayTimeouts:
    """Seconds; ``first_byte`` covers connect + response headers of one attempt."""

    first_byte: float = 60.0
    #: no upstream bytes for this long ends a stream (per read, not a total cap)
    stream_idle: float = 300.0
    #: one deadline over all failover attempts of a request
    attempts_total: float = 120.0
    heartbeat: float = 15.0


@dataclass
class GatewayContext:
    reactor: Any
    clock: Any
    db: DBRunner
    state: SharedState
    settings: Settings
    catalog: CatalogCache
    keys: KeyCache
    key_hasher: KeyHasher
    tokens: TokenCodec
    users: UserCache
    wallets: WalletBook
    settler: Settler
    upstream: UpstreamClient
    health: ChannelHealth
    limiter: GatewayLimiter
    addresses: ClientAddress
    timeouts: GatewayTimeouts
    #: upper bound on a text/JSON request body (contract: 128 MiB global cap -> 413)
    max_body_bytes: int = 128 << 20
    #: output tokens reserved when the client gives no max_tokens
    default_output_reserve: int = 4096
    owned_by: str = "flai"
    #: handler tasks still running (a graceful stop waits for them, then flushes the settler)
    calls: CallsInFlight = field(default_factory=CallsInFlight)
    #: the metric families (operations contract §2); None when metrics are not exposed
    metrics: GatewayMetrics | None = None
    #: spans exported over OTLP (``--otlp-endpoint``); None: no tracer call at all
    tracing: Tracing | None = None

    def now(self) -> datetime:
        return datetime.fromtimestamp(self.clock.seconds(), UTC)
