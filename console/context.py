"""Everything console routes are given: stores, clock, shared state, auth services.

Built once by ``tap`` and handed to each route group, so no route reaches for globals.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from console.services.identity.captcha import Captcha
from console.services.identity.mailer import Mailer
from console.services.identity.passwords import Passwords
from console.services.identity.sessions import Sessions
from console.services.identity.throttle import Throttle
from gateway.catalog.cache import CatalogCache
from gateway.catalog.key_cache import KeyCache
from gateway.client_ip import ClientAddress
from gateway.invalidation import Invalidation
from gateway.keys import KeyHasher
from gateway.links.node import AgentLinks
from gateway.session_tokens import TokenCodec
from gateway.settings.live import LiveSettings
from gateway.settings.store import Settings
from gateway.state.protocol import SharedState
from gateway.store.pool import DBRunner


@dataclass
class ConsoleContext:
    reactor: Any
    #: the clock for timestamps, token expiry and windows (a ``Clock`` in tests)
    clock: Any
    db: DBRunner
    state: SharedState
    live_settings: LiveSettings
    tokens: TokenCodec
    passwords: Passwords
    addresses: ClientAddress
    throttle: Throttle
    sessions: Sessions
    #: announce catalog/key/user changes so every node's caches reload
    invalidation: Invalidation
    #: HMAC of API keys (what is stored and looked up)
    key_hasher: KeyHasher
    #: the routing catalog in memory (reloaded on CATALOG announcements)
    catalog: CatalogCache
    #: API key records by hash (dropped on KEYS announcements)
    keys: KeyCache
    #: this process's node name (``LOCKGATE_NODE_NAME``); multi-node mode requires one
    node_name: str = ""
    #: connector devices' and sandbox hosts' links and their task queue (agents contract §2)
    links: AgentLinks | None = None
    #: SMTP delivery per the ``smtp_*`` settings (built from reactor and clock)
    mailer: Mailer = field(init=False)
    #: captcha verification against the configured provider
    captcha: Captcha = field(init=False)

    def __post_init__(self) -> None:
        self.mailer = Mailer(self.reactor, self.clock)
        self.captcha = Captcha(self.reactor, self.clock, settings=self.settings)

    @property
    def settings(self) -> Settings:
        return self.live_settings.settings

    @property
    def agent_links(self) -> AgentLinks:
        """The links, for the routes that only exist when the composition root built them."""
        if self.links is None:
            raise RuntimeError("agent links are not wired into this console context")
        return self.links

    def now(self) -> datetime:
        return datetime.fromtimestamp(self.clock.seconds(), UTC)

    def issue_token(self, user: dict[str, Any]) -> str:
        hours = self.settings.integer("session_lifetime_hours", 168)
        return self.tokens.issue(user, max(1, hours) * 3600)
