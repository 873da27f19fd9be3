"""A running Lockgate plus the calls link tests repeat: a user with a device token, a link."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import treq
from twisted.internet import reactor
from twisted.internet.task import deferLater

from gateway.links.node import AgentLinks
from gateway.store import connector_tasks as task_store
from gateway.store.connector_tasks import TaskRow
from tests.support.app import AppTestCase, Response
from tests.support.link_client import LinkClient, connect

DEVICES = "/api/user/advanced-chat/devices"


class LinkTestCase(AppTestCase):
    admin_token = ""

    async def admin(self) -> str:
        if not self.admin_token:
            self.admin_token = await self.setup_admin()
        return self.admin_token

    async def user_id(self, login: str) -> int:
        response = await self.call("GET", "/api/user/me", token=login)
        assert response.status == 200, response
        return int(response.json()["id"])

    async def user_with_device(self, username: str = "alice",
                               name: str = "Laptop") -> tuple[str, str, dict[str, Any]]:
        """(login token, device token, device view) for a fresh user."""
        await self.admin()
        login = (await self.register(username))["token"]
        response = await self.call("POST", f"{DEVICES}/token", {"name": name}, token=login)
        assert response.status == 200, response
        body = response.json()
        return login, body["token"], body["device"]

    async def device_tokens(self, count: int) -> tuple[str, list[tuple[str, dict[str, Any]]]]:
        """(login token, [(device token, device view)] of ``count`` devices) of a fresh user."""
        login, token, device = await self.user_with_device()
        made = [(token, device)]
        for number in range(count - 1):
            response = await self.call("POST", f"{DEVICES}/token", {"name": f"box {number}"},
                                       token=login)
            body = response.json()
            made.append((body["token"], body["device"]))
        return login, made

    def transactions_named(self, counts: Callable[[Any], bool]) -> list[str]:
        """Names of the functions run in a transaction from now on that ``counts`` accepts."""
        names: list[str] = []
        db = self.app.db
        transaction = db.transaction

        def recorded(fn: Any, *args: Any, **kwargs: Any) -> Any:
            if counts(fn):
                names.append(getattr(fn, "__qualname__", repr(fn)))
            return transaction(fn, *args, **kwargs)

        db.transaction = recorded  # type: ignore[method-assign]
        self.addCleanup(setattr, db, "transaction", transaction)
        return names

    def links_of(self, app: Any = None) -> AgentLinks:
        links = (app or self.app).ctx.links
        assert links is not None
        return links

    async def link(self, device_token: str, base: str | None = None, **hello: Any) -> LinkClient:
        client = await connect(base or self.base, device_token)
        self.addCleanup(client.transport.abortConnection)
        await client.hello(**hello)
        return client

    async def task_for(self, device: dict[str, Any], user_id: int, app: Any = None,
                       **fields: Any) -> TaskRow:
        fields.setdefault("action", "run_command")
        fields.setdefault("payload", {"command": "echo hi", "timeout_sec": 5})
        return await self.links_of(app).tasks.create(user_id=user_id, device_id=device["id"],
                                                     **fields)

    async def task(self, task_id: str, app: Any = None) -> TaskRow:
        row = await (app or self.app).db.transaction(task_store.get, task_id)
        assert row is not None
        return row

    async def until(self, check: Any, timeout: float = 5.0) -> None:
        """Wait (real time) until ``await check()`` is true."""
        for _ in range(int(timeout / 0.01)):
            if await check():
                return
            await deferLater(reactor, 0.01, lambda: None)
        raise AssertionError("condition not reached in time")

    async def raw_upgrade(self, headers: dict[str, str], query: str = "") -> Response:
        all_headers = {"Connection": "Upgrade", "Upgrade": "websocket",
                       "Sec-WebSocket-Version": "13",
                       "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ=="}
        all_headers.update(headers)
        response = await treq.get(
            f"{self.base}/api/advanced-chat/connectors/ws{query}".encode(),
            headers={k: [v] for k, v in all_headers.items()}, pool=self.pool)
        return Response(response.code, response.headers, await treq.content(response))
