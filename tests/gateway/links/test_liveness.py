"""Liveness of WebSocket links (agents contract §2.4, §2.5): native pings go only to links that
went quiet, from the node's one sweep on the app's clock; a peer that answers nothing is dropped,
marked offline and its running task failed.  Real autobahn clients on a loopback port; the
sweep's time is the test's ``Clock``."""

from __future__ import annotations

from typing import Any

from twisted.internet import reactor
from twisted.internet.task import deferLater

from gateway.links.liveness import PING_AFTER_SECONDS, PONG_TIMEOUT_SECONDS, SWEEP_SECONDS
from gateway.links.websocket import DeviceLink
from gateway.store import devices as device_store
from tests.gateway.links.link_case import DEVICES, LinkTestCase
from tests.support.link_client import LinkClient, connect


class PingCountingClient(LinkClient):
    """Counts the native pings it gets and answers them (autobahn's pong)."""

    answers = True

    def __init__(self) -> None:
        super().__init__()
        self.pings = 0

    def onPing(self, payload: bytes) -> None:
        self.pings += 1
        if self.answers:
            super().onPing(payload)


class DeafClient(PingCountingClient):
    """A peer that stopped answering: gets pings, sends nothing back."""

    answers = False


class LivenessTests(LinkTestCase):
    async def linked(self, protocol: type[PingCountingClient]) -> tuple[
            str, dict[str, Any], PingCountingClient]:
        login, token, device = await self.user_with_device()
        client = await connect(self.base, token, protocol=protocol)
        self.addCleanup(client.transport.abortConnection)  # type: ignore[union-attr]
        await client.hello()
        assert isinstance(client, PingCountingClient)
        return login, device, client

    def server_link(self, device: dict[str, Any]) -> DeviceLink:
        link = self.links_of().hub.links[device["id"]]
        assert isinstance(link, DeviceLink)
        return link

    async def advance(self, seconds: float) -> None:
        """Move the app's clock in sweep steps, letting the sockets run between them."""
        for _ in range(round(seconds / SWEEP_SECONDS)):
            self.clock.advance(SWEEP_SECONDS)
            await deferLater(reactor, 0.01, lambda: None)

    async def online(self, login: str, device: dict[str, Any]) -> bool:
        shown = (await self.call("GET", f"{DEVICES}/{device['id']}", token=login)).json()
        return bool(shown["online"])

    async def test_a_silent_link_is_pinged_and_an_answer_keeps_it(self) -> None:
        login, device, client = await self.linked(PingCountingClient)
        await self.advance(PING_AFTER_SECONDS - SWEEP_SECONDS)
        await deferLater(reactor, 0.05, lambda: None)
        assert client.pings == 0
        await self.advance(SWEEP_SECONDS)
        await self.until(lambda: _true(client.pings == 1))
        link = self.server_link(device)
        await self.until(lambda: _true(link.pinged_at is None))  # the pong came back
        await self.advance(max(PING_AFTER_SECONDS, PONG_TIMEOUT_SECONDS) - SWEEP_SECONDS)
        await deferLater(reactor, 0.05, lambda: None)
        assert not client.closed.called  # the pong answered the ping: not dropped
        assert self.links_of().hub.links.get(device["id"]) is link
        assert client.pings == 1  # not quiet long enough since the pong yet
        await self.advance(SWEEP_SECONDS)
        await self.until(lambda: _true(client.pings == 2))
        assert await self.online(login, device)

    async def test_a_link_that_heartbeats_gets_no_native_pings(self) -> None:
        login, device, client = await self.linked(PingCountingClient)
        link = self.server_link(device)
        for _ in range(12):  # two minutes of heartbeats every 10 s
            await self.advance(2 * SWEEP_SECONDS)
            client.send({"type": "heartbeat"})
            await client.next_of("heartbeat_ack")
        await deferLater(reactor, 0.05, lambda: None)
        assert client.pings == 0
        # no ping timer per link either (autobahn's auto-ping keeps one armed per link)
        assert link.autoPingPendingCall is None and link.autoPingTimeoutCall is None
        assert await self.online(login, device)

    async def test_a_dead_peer_is_dropped_marked_offline_and_its_task_failed(self) -> None:
        login, device, client = await self.linked(DeafClient)
        task = await self.task_for(device, await self.user_id(login))
        await client.next_of("task")
        await self.advance(PING_AFTER_SECONDS)
        await self.until(lambda: _true(client.pings == 1))
        await self.advance(PONG_TIMEOUT_SECONDS - SWEEP_SECONDS)
        await deferLater(reactor, 0.05, lambda: None)
        assert not client.closed.called  # not yet: the pong may still come
        await self.advance(SWEEP_SECONDS)
        code = await client.close_code()
        assert code not in (1000, 4400, 4401, 4409), code
        await self.until(lambda: self._task_failed(task.id))
        row = await self.app.db.transaction(device_store.get, device["id"])
        assert row is not None and row.status == device_store.OFFLINE and row.link_id is None
        assert not await self.online(login, device)
        assert device["id"] not in self.links_of().hub.links

    async def _task_failed(self, task_id: str) -> bool:
        row = await self.task(task_id)
        return row.status == "failed" and row.error_message == "connector disconnected"


async def _true(value: bool) -> bool:
    return value
