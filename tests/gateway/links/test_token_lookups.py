"""Many links opening at once read their tokens in shared transactions (``token_lookups``), and
every upgrade is still judged on the database as it is: a good token upgrades, a token rotated
while its lookup waited and an unknown token get 401 before any upgrade."""

from __future__ import annotations

import threading
from typing import Any

from twisted.internet.defer import ensureDeferred, gatherResults

from gateway.links.token_lookups import TokenLookups
from gateway.store import devices as device_store
from tests.gateway.links.link_case import LinkTestCase
from tests.support.link_client import connect

LINKS = 8


class TokenLookupTests(LinkTestCase):
    def lookups(self) -> list[str]:
        """Names of the token lookups run in a transaction from now on."""
        return self.transactions_named(lambda fn: getattr(fn, "__qualname__", "") in (
            "find_group", "find_by_token_hash"))

    async def tokens(self, count: int) -> list[tuple[str, dict[str, Any]]]:
        return (await self.device_tokens(count))[1]

    async def test_upgrades_at_once_share_a_lookup_and_each_is_judged(self) -> None:
        made = await self.tokens(LINKS + 1)
        good, (rotated_token, rotated_device) = made[:-1], made[-1]
        # the database thread is busy while all the upgrades arrive
        release = threading.Event()
        busy = self.app.db.transaction(lambda conn: release.wait(30))
        self.addCleanup(release.set)
        names = self.lookups()
        opening = [ensureDeferred(connect(self.base, token)) for token, _ in good]
        refused = [ensureDeferred(self.raw_upgrade({"X-Connector-Token": token}))
                   for token in (rotated_token, "wpc_nope")]
        # every lookup is waiting; the token is rotated before any of them is read
        await self.until(lambda: _true(len(self.links_of().endpoint.lookups._waiting)
                                       >= LINKS + 1))
        rotation = self.app.db.transaction(device_store.set_token, rotated_device["id"],
                                           "f" * 64, self.app.ctx.now())
        release.set()
        await busy
        await rotation
        clients = await gatherResults(opening)
        for client in clients:
            self.addCleanup(client.transport.abortConnection)  # type: ignore[union-attr]
        for response in await gatherResults(refused):
            assert response.status == 401, response
            assert response.json()["error"] == "Invalid connector token"
        # one transaction for the first lookup, one for all the others (not one each)
        assert len(names) <= 2, names
        welcomes = [await client.hello() for client in clients]
        assert {w["device"]["id"] for w in welcomes} == {d["id"] for _, d in good}

    async def test_a_lone_lookup_finds_the_device_or_nothing(self) -> None:
        made = await self.tokens(1)
        lookups = TokenLookups(self.app.db)
        found = await lookups.find(device_store_hash(made[0][0]))
        assert found is not None and found.id == made[0][1]["id"]
        assert await lookups.find("0" * 64) is None

    async def test_a_failed_read_fails_its_group_and_the_next_group_still_runs(self) -> None:
        made = await self.tokens(1)
        lookups = TokenLookups(self.app.db)
        release = threading.Event()
        busy = self.app.db.transaction(lambda conn: release.wait(30))
        self.addCleanup(release.set)
        first = lookups.find(device_store_hash(made[0][0]))
        # a value the database driver cannot bind fails the whole second group
        broken = lookups.find(object())  # type: ignore[arg-type]
        also = lookups.find(device_store_hash(made[0][0]))
        release.set()
        await busy
        assert (await first) is not None
        failures = 0
        for deferred in (broken, also):
            try:
                await deferred
            except Exception:
                failures += 1
        assert failures == 2
        # and the runner is ready for the next lookup
        assert (await lookups.find(device_store_hash(made[0][0]))) is not None


def device_store_hash(token: str) -> str:
    from gateway.links.ids import token_hash

    return token_hash(token)


async def _true(value: bool) -> bool:
    return value
