"""The long-poll transport (agents contract §2.3) on the same queue as the WebSocket link."""

from __future__ import annotations

from typing import Any

import orjson
import treq
from twisted.internet import reactor
from twisted.internet.defer import Deferred, ensureDeferred
from twisted.internet.task import deferLater

from tests.gateway.links.link_case import DEVICES, LinkTestCase
from tests.support.app import Response

CONNECTORS = "/api/advanced-chat/connectors"


class LongPollTests(LinkTestCase):
    async def device_call(self, method: str, path: str, token: str, body: Any = None,
                          header: str = "X-Connector-Token") -> Response:
        value = f"Bearer {token}" if header == "Authorization" else token
        return await self.call(method, CONNECTORS + path, body, headers={header: value})

    async def test_register_poll_and_result(self) -> None:
        login, token, device = await self.user_with_device()
        registered = await self.device_call("POST", "/register", token, {
            "hostname": "box", "os": "linux", "arch": "arm64", "version": "0.9",
            "mode": "sandboxd"})
        assert registered.status == 200
        view = registered.json()
        assert view["online"] is True and view["hostname"] == "box"
        assert view["mode"] == "platform"  # a user device never becomes sandboxd ([P-20])
        beat = await self.device_call("POST", "/heartbeat", token, header="Authorization")
        assert beat.json() == {"ok": True, "device_id": device["id"]}

        task = await self.task_for(device, await self.user_id(login))
        polled = await self.device_call("GET", "/tasks/next", token)
        assert polled.json()["task"]["id"] == task.id
        assert (await self.task(task.id)).status == "running"
        done = await self.device_call("POST", f"/tasks/{task.id}/result", token,
                                      {"success": True, "result": "ok"})
        assert done.json() == {"ok": True}
        row = await self.task(task.id)
        assert (row.status, row.result) == ("completed", "ok")
        retried = await self.device_call("POST", f"/tasks/{task.id}/result", token,
                                         {"success": True, "result": "again"})
        assert retried.json() == {"ok": True, "ignored": True}
        assert (await self.task(task.id)).result == "ok"

    async def test_a_waiting_poll_gets_a_new_task_at_once_and_times_out_empty(self) -> None:
        login, token, device = await self.user_with_device()
        poll = ensureDeferred(self.device_call("GET", "/tasks/next", token))
        await self.until(lambda: _true(device["id"] in self.links_of().hub._polls))
        task = await self.task_for(device, await self.user_id(login))
        answered = await poll
        assert answered.json()["task"]["id"] == task.id

        empty = ensureDeferred(self.device_call("GET", "/tasks/next", token))
        await self.until(lambda: _true(device["id"] in self.links_of().hub._polls))
        self.clock.advance(25)
        assert (await empty).json() == {"task": None}

    async def test_a_task_is_handed_out_once_across_transports(self) -> None:
        login, token, device = await self.user_with_device()
        polls = [ensureDeferred(self.device_call("GET", "/tasks/next", token))
                 for _ in range(3)]
        client = await self.link(token, max_parallel=3)
        await self.until(lambda: _true(len(self.links_of().hub._polls.get(device["id"], []))
                                       == 3))
        user_id = await self.user_id(login)
        tasks = [await self.task_for(device, user_id, payload={"command": f"echo {n}"})
                 for n in range(6)]
        received = [(await client.next_of("task"))["task"]["id"] for _ in range(3)]
        for poll in polls:
            answer = (await poll).json()["task"]
            received.append(answer["id"])
        assert sorted(received) == sorted(task.id for task in tasks)

    async def test_bad_requests(self) -> None:
        _, token, _ = await self.user_with_device()
        missing = await self.call("POST", CONNECTORS + "/register", {})
        assert (missing.status, missing.json()["error"]) == (401, "Connector token is required")
        wrong = await self.device_call("POST", "/register", "wpc_wrong", {})
        assert (wrong.status, wrong.json()["error"]) == (401, "Invalid connector token")
        # ?token= is for the WebSocket endpoint only
        query = await self.call("GET", CONNECTORS + f"/tasks/next?token={token}")
        assert query.status == 401
        malformed = await self.call("POST", CONNECTORS + "/register", data=b"{oops",
                                    headers={"X-Connector-Token": token})
        assert malformed.status == 400 and "malformed JSON" in malformed.json()["error"]
        bad = await self.device_call("POST", "/tasks/act-x/result", token, {"success": 1})
        assert (bad.status, bad.json()["error"]) == (400, "success must be a boolean")
        unknown = await self.device_call("GET", "/nothing", token)
        assert unknown.status == 404

    async def test_a_poll_left_by_its_client_returns_a_later_claim_to_the_queue(self) -> None:
        login, token, device = await self.user_with_device()
        request: Deferred[Any] = treq.get(
            f"{self.base}{CONNECTORS}/tasks/next".encode(),
            headers={"X-Connector-Token": [token]}, pool=self.pool)
        await self.until(lambda: _true(device["id"] in self.links_of().hub._polls))
        request.cancel()
        request.addErrback(lambda _: None)
        await self.until(lambda: _true(device["id"] not in self.links_of().hub._polls))
        task = await self.task_for(device, await self.user_id(login))
        await deferLater(reactor, 0.05, lambda: None)
        assert (await self.task(task.id)).status == "queued"
        shown = await self.call("GET", f"{DEVICES}/{device['id']}/tasks", token=login)
        assert [item["id"] for item in shown.json()] == [task.id]
        assert orjson.loads(shown.body)[0]["status"] == "queued"


async def _true(value: bool) -> bool:
    return value
