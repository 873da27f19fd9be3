"""Links that say hello at once claim the tasks queued for their devices in shared
transactions (``claim_batch``), and each device still gets exactly its own task, on its own
link; a group that fails is retried claim by claim."""

from __future__ import annotations

import threading
from typing import Any

from sqlalchemy.exc import StatementError
from twisted.internet.defer import ensureDeferred, gatherResults

from gateway.links.claim_batch import Claim, TaskClaims
from gateway.links.ids import new_id
from gateway.store import connector_tasks as task_store
from tests.gateway.links.link_case import DEVICES, LinkTestCase
from tests.support.link_client import LinkClient, connect

LINKS = 8
HELLO = {"type": "hello", "protocol": 1, "hostname": "box", "os": "linux", "arch": "amd64",
         "version": "1", "kind": "cli", "mode": "platform"}


class ClaimBatchTests(LinkTestCase):
    def claims(self) -> list[str]:
        """Names of the claims run in a transaction from now on."""
        return self.transactions_named(lambda fn: getattr(fn, "__qualname__", "") in (
            "claim", "claim_group", "claim_next"))

    async def devices(self, count: int) -> tuple[int, list[tuple[str, dict[str, Any]]]]:
        login, made = await self.device_tokens(count)
        return await self.user_id(login), made

    async def test_hellos_at_once_claim_together_and_each_gets_its_own_task(self) -> None:
        user_id, made = await self.devices(LINKS)
        # the last two devices have nothing queued: their links claim nothing
        queued = {device["id"]: await self.task_for(device, user_id) for _, device in made[:-2]}
        clients: list[LinkClient] = []
        for token, _ in made:
            client = await connect(self.base, token)
            self.addCleanup(client.transport.abortConnection)  # type: ignore[union-attr]
            clients.append(client)
        # the database thread is busy while all the hellos arrive: they register together,
        # and every link then claims at once
        release = threading.Event()
        busy = self.app.db.transaction(lambda conn: release.wait(30))
        self.addCleanup(release.set)
        names = self.claims()
        for client in clients:
            client.send(HELLO)
        await self.until(lambda: _true(len(self.links_of().factory.registrations._waiting)
                                       == LINKS - 1))
        release.set()
        await busy
        frames = await gatherResults([ensureDeferred(client.next_of("task"))
                                      for client in clients[:-2]])
        hub = self.links_of().hub
        for (_, device), frame in zip(made[:-2], frames, strict=True):
            task = await self.task(frame["task"]["id"])
            assert task.id == queued[device["id"]].id
            assert task.status == "running" and task.claimed_by == hub.links[device["id"]].link_id
        # a claim each for the queued task and for room left (terminal actions), in shared
        # transactions: not two transactions per link
        assert len(names) <= LINKS // 2, names
        # a link whose device had nothing queued knows it and is served at once later
        idle: Any = hub.links[made[-1][1]["id"]]
        await self.until(lambda: _true(idle._queue_empty))
        later = await self.task_for(made[-1][1], user_id)
        assert (await clients[-1].next_of("task"))["task"]["id"] == later.id

    async def test_a_failed_group_is_retried_claim_by_claim(self) -> None:
        user_id, made = await self.devices(2)
        (_, first), (_, second) = made
        tasks = [await self.task_for(device, user_id) for device in (first, second)]
        claims = TaskClaims(self.app.db)
        release = threading.Event()
        busy = self.app.db.transaction(lambda conn: release.wait(30))
        self.addCleanup(release.set)
        now = self.app.ctx.now()
        lone = claims.claim(Claim("no-such-device", None, new_id("lnk"), now, None))
        good = [claims.claim(Claim(device["id"], user_id, new_id("lnk"), now, None))
                for device in (first, second)]
        # a value the driver cannot bind fails the whole group it is in
        bad = claims.claim(Claim(object(), None, new_id("lnk"), now, None))  # type: ignore[arg-type]
        release.set()
        await busy
        assert await lone is None
        claimed = [await d for d in good]
        assert [row.id if row else None for row in claimed] == [task.id for task in tasks]
        try:
            await bad
        except Exception:
            pass
        else:
            raise AssertionError("a claim that cannot run must fail")
        # the group's failure was logged once (then each claim ran on its own)
        assert len(self.flushLoggedErrors(StatementError)) == 1




class QueuedAmongTests(LinkTestCase):
    """The group's one read (``connector_tasks.queued_among``): exactly the devices with a
    queued task, whoever owns it and whatever its action."""

    async def test_only_devices_with_a_queued_task_are_named(self) -> None:
        login, _, first = await self.user_with_device()
        user_id = await self.user_id(login)
        response = await self.call("POST", f"{DEVICES}/token", {"name": "second"}, token=login)
        second = response.json()["device"]
        response = await self.call("POST", f"{DEVICES}/token", {"name": "third"}, token=login)
        third = response.json()["device"]
        await self.task_for(first, user_id)
        await self.task_for(first, user_id, action="terminal_open", payload={})
        running = await self.task_for(second, user_id)
        claimed = await self.app.db.transaction(
            task_store.claim, running.id, new_id("lnk"), self.app.ctx.now())
        assert claimed is not None
        ids = [first["id"], second["id"], third["id"], "no-such-device"]
        found = await self.app.db.transaction(task_store.queued_among, ids)
        assert found == {first["id"]}
        assert await self.app.db.transaction(task_store.queued_among, []) == set()


class QueuedAmongPostgresTests(QueuedAmongTests):
    backend = "postgresql"


async def _true(value: bool) -> bool:
    return value
