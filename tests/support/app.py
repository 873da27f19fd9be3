"""A running Lockgate (real resources, real HTTP on a loopback port) for console tests.

``AppTestCase`` opens the app on a fresh SQLite file (or PostgreSQL when ``backend`` says so),
listens on 127.0.0.1:0 and offers ``call()`` to make real HTTP requests with treq.
"""

from __future__ import annotations

import itertools
import shutil
import tempfile
from typing import Any

import orjson
import treq
from argon2 import PasswordHasher
from twisted.internet import reactor
from twisted.internet.task import Clock, deferLater
from twisted.protocols.policies import WrappingFactory
from twisted.trial.unittest import TestCase
from twisted.web.client import HTTPConnectionPool

from console.services.identity.passwords import Passwords
from tap.app import Lockgate
from tap.http_channel import LockgateSite
from tap.secrets import Secrets
from tests.support.migrated_databases import migrated_postgres_url, migrated_sqlite_url

#: argon2id with small costs: the real code path, without 100 ms per hash
CHEAP_HASHER = PasswordHasher(time_cost=1, memory_cost=64, parallelism=1)
TEST_SECRETS = Secrets.from_master(b"t" * 64)
_ip_counter = itertools.count(1)


class Response:
    def __init__(self, status: int, headers: Any, body: bytes) -> None:
        self.status = status
        self.headers = headers
        self.body = body

    def json(self) -> Any:
        return orjson.loads(self.body)

    def header(self, name: str) -> str | None:
        values = self.headers.getRawHeaders(name)
        return values[0] if values else None

    def __repr__(self) -> str:
        return f"<Response {self.status} {self.body[:200]!r}>"


class AppTestCase(TestCase):
    """Subclasses may set ``backend = "postgresql"``."""

    backend = "sqlite"
    #: seconds the test Clock starts at (token expiry etc. are driven by it)
    start_time = 1_800_000_000.0

    def setUp(self) -> None:
        self.clock = Clock()
        self.clock.advance(self.start_time)
        if self.backend == "postgresql":
            self.database_url = migrated_postgres_url()
        else:
            directory = tempfile.mkdtemp(prefix="lockgate-test-")
            self.addCleanup(shutil.rmtree, directory, True)  # runs after app.close
            self.database_url = migrated_sqlite_url(directory)
        self.app = self.open_app()
        self.addCleanup(self.app.close)
        self.port = self.listen(self.app)
        self.base = f"http://127.0.0.1:{self.port.getHost().port}"
        self.pool = HTTPConnectionPool(reactor, persistent=False)
        self.addCleanup(self.pool.closeCachedConnections)

    def serve(self, app: Lockgate) -> str:
        """The base URL of ``app`` (a second node, say) listening on a loopback port."""
        return f"http://127.0.0.1:{self.listen(app).getHost().port}"

    def listen(self, app: Lockgate) -> Any:
        """Listen on a loopback port for ``app``; closed at cleanup, with its keep-alive
        connections dropped (they would leave the reactor dirty)."""
        factory = WrappingFactory(LockgateSite(app.root))
        port = reactor.listenTCP(0, factory, interface="127.0.0.1")

        def drop_connections() -> Any:
            for protocol in list(factory.protocols):
                protocol.transport.abortConnection()
            return deferLater(reactor, 0.01, lambda: None)

        self.addCleanup(drop_connections)
        self.addCleanup(port.stopListening)
        return port

    def open_app(self, **overrides: Any) -> Lockgate:
        options: dict[str, Any] = dict(
            database=self.database_url, secrets=TEST_SECRETS, clock=self.clock,
            passwords=Passwords(reactor, CHEAP_HASHER),
            trusted_proxies="127.0.0.1",
            # the database starts at the migrations' head (tests.support.migrated_databases)
            run_migrations=False,
        )
        options.update(overrides)
        return Lockgate.open(reactor, **options)

    @property
    def ctx(self) -> Any:
        return self.app.ctx

    def fresh_ip(self) -> str:
        """A distinct client IP (via the trusted loopback proxy) so throttles do not collide."""
        n = next(_ip_counter)
        return f"198.51.{n // 250}.{n % 250 + 1}"

    async def call(self, method: str, path: str, json: Any = None, *, token: str | None = None,
                   headers: dict[str, str] | None = None, data: bytes | None = None,
                   ip: str | None = None) -> Response:
        all_headers = {"X-Forwarded-For": ip or self.fresh_ip()}
        if token:
            all_headers["Authorization"] = f"Bearer {token}"
        all_headers.update(headers or {})
        body = data if data is not None else (orjson.dumps(json) if json is not None else None)
        if body is not None:
            all_headers.setdefault("Content-Type", "application/json")
        response = await treq.request(
            method, (self.base + path).encode(), data=body,
            headers={k: [v] for k, v in all_headers.items()}, pool=self.pool,
        )
        content = await treq.content(response)
        return Response(response.code, response.headers, content)

    async def setup_admin(self, username: str = "admin", email: str = "admin@example.com",
                          password: str = "correct horse") -> str:
        response = await self.call("POST", "/api/setup", {
            "username": username, "email": email, "password": password})
        assert response.status == 200, response
        return response.json()["token"]

    async def register(self, username: str, password: str = "password123",
                       email: str | None = None) -> dict[str, Any]:
        response = await self.call("POST", "/auth/password/register", {
            "username": username, "email": email or f"{username}@example.com",
            "password": password})
        assert response.status == 200, response
        return response.json()
