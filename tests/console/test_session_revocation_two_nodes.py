"""Console revocation reaches every node at once, though each node serves sessions from memory.

Two Lockgate nodes share one PostgreSQL database and one real redis-server.  Node B uses the
user's login token first (so B's user cache holds them); node A then changes the password,
disables, demotes or deletes the user.  Once the USERS message reached B's subscriber (one bus
round trip, no clock advance: the cache's TTL plays no part), B must refuse the old token on
console routes -- with a cache that ignored the bus, B would answer 200 for up to the TTL.
``lockgate-admin reset-password --redis`` is a revocation too: it tells both nodes.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import treq
from twisted.internet import reactor
from twisted.internet.defer import DeferredQueue
from twisted.internet.threads import deferToThread

from gateway.invalidation import USERS
from tests.support.app import AppTestCase, Response
from tests.support.redis_nodes import SharedRedisNodes

LISTING = "/api/user/api-keys"
#: the operators' tool, installed next to this interpreter
ADMIN = str(Path(sys.executable).parent / "lockgate-admin")


class ConsoleRevocationAcrossNodesTests(SharedRedisNodes, AppTestCase):
    backend = "postgresql"

    async def ready(self) -> None:
        self.admin_token = await self.setup_admin()
        alice = await self.register("alice")
        self.user_id, self.token = alice["user"]["id"], alice["token"]
        node = self.node_b = self.open_app()
        self.addCleanup(node.close)
        self.base_b = self.serve(node)
        # B's own subscriber, added after its Invalidation's: once it has a USERS message,
        # so has B's user cache
        self.bus_b: DeferredQueue[bytes] = DeferredQueue()
        node.state.subscribe(USERS, self.bus_b.put)
        await node.state.settled()
        assert (await self.on_b("GET", LISTING, self.token)).status == 200  # B caches alice

    async def on_b(self, method: str, path: str, token: str) -> Response:
        headers: dict[bytes | str, list[bytes | str]] = {"Authorization": [f"Bearer {token}"]}
        response = await treq.request(method, (self.base_b + path).encode(), headers=headers,
                                      pool=self.pool)
        return Response(response.code, response.headers, await treq.content(response))

    async def one_bus_round_trip(self) -> None:
        d = self.bus_b.get()
        d.addTimeout(5, reactor)
        await d

    async def test_password_change_on_a_refuses_the_old_token_on_b(self) -> None:
        await self.ready()
        changed = await self.call("POST", "/api/user/password/change", {
            "current_password": "password123", "new_password": "another-pass-456"},
            token=self.token)
        assert changed.status == 200, changed
        await self.one_bus_round_trip()
        old = await self.on_b("GET", LISTING, self.token)
        assert old.status == 401
        assert old.json()["error"] == "Invalid session"
        assert (await self.on_b("GET", LISTING, changed.json()["token"])).status == 200

    async def test_disable_on_a_refuses_the_old_token_on_b(self) -> None:
        await self.ready()
        disabled = await self.call("PUT", f"/api/users/{self.user_id}", {"enabled": False},
                                   token=self.admin_token)
        assert disabled.status == 200, disabled
        await self.one_bus_round_trip()
        assert (await self.on_b("GET", LISTING, self.token)).status == 401

    async def test_demotion_on_a_refuses_admin_routes_on_b(self) -> None:
        await self.ready()
        promoted = await self.call("PUT", f"/api/users/{self.user_id}", {"is_admin": True},
                                   token=self.admin_token)
        assert promoted.status == 200, promoted
        await self.one_bus_round_trip()
        assert (await self.on_b("GET", "/api/settings", self.token)).status == 200
        demoted = await self.call("PUT", f"/api/users/{self.user_id}", {"is_admin": False},
                                  token=self.admin_token)
        assert demoted.status == 200, demoted
        await self.one_bus_round_trip()
        assert (await self.on_b("GET", "/api/settings", self.token)).status == 401

    async def test_deletion_on_a_refuses_the_old_token_on_b(self) -> None:
        await self.ready()
        deleted = await self.call("DELETE", f"/api/users/{self.user_id}",
                                  token=self.admin_token)
        assert deleted.status == 200, deleted
        await self.one_bus_round_trip()
        gone = await self.on_b("GET", LISTING, self.token)
        assert gone.status == 401
        assert gone.json()["error"] == "User not found"

    async def test_reset_password_by_the_admin_tool_refuses_the_old_token_everywhere(
            self) -> None:
        await self.ready()
        bus_a: DeferredQueue[bytes] = DeferredQueue()
        self.app.state.subscribe(USERS, bus_a.put)
        assert (await self.call("GET", LISTING, token=self.token)).status == 200  # A caches her
        done = await deferToThread(
            subprocess.run,
            [ADMIN, "--database", self.database_url, "--redis", self.redis_url,
             "reset-password", "alice"],
            input="a-new-password-789\n", capture_output=True, text=True, timeout=120,
            check=False)
        assert done.returncode == 0, done.stderr
        assert "told to refuse the old sessions at once" in done.stdout
        await self.one_bus_round_trip()
        heard = bus_a.get()
        heard.addTimeout(5, reactor)
        await heard
        assert (await self.on_b("GET", LISTING, self.token)).status == 401
        assert (await self.call("GET", LISTING, token=self.token)).status == 401
