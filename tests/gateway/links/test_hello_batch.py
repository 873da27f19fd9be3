"""Many links saying hello at once share registration transactions (a group commit), and every
device still ends up online exactly once, on its own link; a hello refused inside a group (its
token was rotated meanwhile) is closed 4401 without holding up the others."""

from __future__ import annotations

import threading
from typing import Any

from twisted.internet.defer import ensureDeferred, gatherResults

from gateway.links.hub import CLOSE_REVOKED
from gateway.store import devices as device_store
from tests.gateway.links.link_case import DEVICES, LinkTestCase
from tests.support.link_client import LinkClient, connect

LINKS = 12
HELLO = {"type": "hello", "protocol": 1, "hostname": "box", "os": "linux", "arch": "amd64",
         "version": "1", "kind": "cli", "mode": "platform"}


class HelloBatchTests(LinkTestCase):
    def registrations(self) -> list[str]:
        """Names of the hello registrations run in a transaction from now on."""
        return self.transactions_named(
            lambda fn: getattr(fn, "__module__", "").startswith("gateway.links.")
            and "register" in getattr(fn, "__qualname__", ""))

    async def hello_timers(self) -> int:
        return sum(1 for call in self.clock.getDelayedCalls()
                   if call.active() and getattr(call.func, "__name__", "") == "_hello_overdue")

    async def test_hellos_at_once_share_a_transaction_and_all_come_online_once(self) -> None:
        login, made = await self.device_tokens(LINKS)
        clients: list[LinkClient] = []
        for token, _ in made:
            client = await connect(self.base, token)
            self.addCleanup(client.transport.abortConnection)  # type: ignore[union-attr]
            clients.append(client)
        # the database thread is busy while all the hellos arrive
        release = threading.Event()
        busy = self.app.db.transaction(lambda conn: release.wait(30))
        self.addCleanup(release.set)
        names = self.registrations()
        _, revoked_device = made[-1]
        clients[0].send(HELLO)  # the first goes at once, alone
        await self.until(lambda: _is(self.hello_timers(), LINKS - 1))
        for client in clients[1:]:
            client.send(HELLO)
        await self.until(lambda: _is(self.hello_timers(), 0))
        # one token is rotated while its hello waits in the group
        rotated = self.app.db.transaction(device_store.set_token, revoked_device["id"],
                                          "f" * 64, self.app.ctx.now())
        release.set()
        await busy
        await rotated
        welcomes = await gatherResults([ensureDeferred(client.next_of("welcome"))
                                        for client in clients[:-1]])
        # one transaction for the first hello, one for all the others (not one each)
        assert len(names) <= 2, names
        assert await clients[-1].close_code() == CLOSE_REVOKED
        hub = self.links_of().hub
        expected = {device["id"] for _, device in made[:-1]}
        assert {welcome["device"]["id"] for welcome in welcomes} == expected
        assert set(hub.links) == expected
        for device_id in expected:
            row = await self.app.db.transaction(device_store.get, device_id)
            assert row is not None and row.status == device_store.ONLINE
            assert row.link_id == hub.links[device_id].link_id
        revoked = await self.app.db.transaction(device_store.get, revoked_device["id"])
        assert revoked is not None and revoked.link_id is None
        listed = (await self.call("GET", DEVICES, token=login)).json()
        assert sorted(item["id"] for item in listed if item["online"]) == sorted(expected)


async def _is(value: Any, expected: Any) -> bool:
    return bool(await value == expected)
