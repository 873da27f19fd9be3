"""The WebSocket link end to end (agents contract §2.4, [P-18], [P-21]): a real autobahn client
on a loopback port against the real app and database."""

from __future__ import annotations

from typing import Any

from autobahn.websocket.protocol import WebSocketProtocol

from gateway.store import devices as device_store
from tests.gateway.links.link_case import DEVICES, LinkTestCase
from tests.support.link_client import connect


class LinkRoundTripTests(LinkTestCase):
    async def test_task_reaches_the_linked_device_and_its_result_comes_back(self) -> None:
        login, token, device = await self.user_with_device()
        client = await self.link(token, max_parallel=1)
        shown = (await self.call("GET", f"{DEVICES}/{device['id']}", token=login)).json()
        assert shown["online"] is True and shown["status"] == "online"
        assert shown["hostname"] == "test-box"

        task = await self.task_for(device, await self.user_id(login),
                                   workspace_path="/home/u/proj")
        waiting = self.links_of().tasks.wait(task)
        frame = await client.next_of("task")
        assert frame["task"] == {
            "id": task.id, "action": "run_command", "workspace_path": "/home/u/proj",
            "workspace_unrestricted": False,
            "payload": {"command": "echo hi", "timeout_sec": 5},
            "created_at": frame["task"]["created_at"]}
        assert (await self.task(task.id)).status == "running"

        client.send({"type": "task_result", "task_id": task.id, "success": False,
                     "stdout": "hi\n", "stderr": "warn", "error": "exit status 1",
                     "exit_code": 1})
        ack = await client.next_of("task_result_ack")
        assert ack == {"type": "task_result_ack", "task_id": task.id, "ok": True}
        finished = await waiting
        assert finished is not None and finished.status == "failed"
        shown = (await self.call("GET", f"/api/user/advanced-chat/connector-tasks/{task.id}",
                                 token=login)).json()
        assert shown["status"] == "failed"
        assert shown["result"] == "stdout:\nhi\n\n\nstderr:\nwarn"
        assert shown["error_message"] == "exit status 1; exit code 1"
        # a retried result is acknowledged and ignored
        client.send({"type": "task_result", "task_id": task.id, "success": True})
        again = await client.next_of("task_result_ack")
        assert again["ignored"] is True
        assert (await self.task(task.id)).status == "failed"

    async def test_max_parallel_limits_tasks_in_flight(self) -> None:
        login, token, device = await self.user_with_device()
        client = await self.link(token, max_parallel=2)
        user_id = await self.user_id(login)
        tasks = [await self.task_for(device, user_id, payload={"command": f"echo {n}"})
                 for n in range(3)]
        first = await client.next_of("task")
        second = await client.next_of("task")
        assert [first["task"]["id"], second["task"]["id"]] == [tasks[0].id, tasks[1].id]
        # the third waits (a terminal action would not)
        terminal = await self.task_for(device, user_id, action="terminal_open",
                                       payload={"shell": "sh"})
        frame = await client.next_of("task")
        assert frame["task"]["id"] == terminal.id
        assert (await self.task(tasks[2].id)).status == "queued"
        client.send({"type": "task_result", "task_id": tasks[0].id, "success": True,
                     "result": "0"})
        await client.next_of("task_result_ack")
        third = await client.next_of("task")
        assert third["task"]["id"] == tasks[2].id

    async def test_queued_tasks_are_dispatched_on_connect_and_heartbeats_are_acked(self) -> None:
        login, token, device = await self.user_with_device()
        task = await self.task_for(device, await self.user_id(login))
        client = await self.link(token)
        assert (await client.next_of("task"))["task"]["id"] == task.id
        client.send({"type": "heartbeat", "version": "1.0.1"})
        ack = await client.next_of("heartbeat_ack")
        assert ack["server_time"].endswith("Z")
        row = await self.app.db.transaction(device_store.get, device["id"])
        assert row is not None and row.version == "1.0.1"

    async def test_cancel_reaches_the_device(self) -> None:
        login, token, device = await self.user_with_device()
        client = await self.link(token)
        task = await self.task_for(device, await self.user_id(login))
        await client.next_of("task")
        response = await self.call(
            "POST", f"{DEVICES}/{device['id']}/tasks/{task.id}/cancel", token=login)
        assert response.status == 200 and response.json() == {"ok": True}
        cancel = await client.next_of("task_cancel")
        assert cancel == {"type": "task_cancel", "task_id": task.id,
                          "reason": "cancelled by user"}
        row = await self.task(task.id)
        assert (row.status, row.error_message) == ("failed", "cancelled by user")
        again = await self.call(
            "POST", f"{DEVICES}/{device['id']}/tasks/{task.id}/cancel", token=login)
        assert again.status == 409


class LinkLifecycleTests(LinkTestCase):
    async def test_bad_tokens_are_refused_before_the_upgrade(self) -> None:
        await self.user_with_device()
        missing = await self.raw_upgrade({})
        assert missing.status == 401
        assert missing.json()["error"] == "Connector token is required"
        wrong = await self.raw_upgrade({"X-Connector-Token": "wpc_nope"})
        assert wrong.status == 401
        assert wrong.json()["error"] == "Invalid connector token"
        by_query = await self.raw_upgrade({}, "?token=wpc_nope")
        assert by_query.json()["error"] == "Invalid connector token"

    async def test_token_by_bearer_and_query(self) -> None:
        _, token, _ = await self.user_with_device()
        for via in ("bearer", "query"):
            client = await connect(self.base, token, via=via)
            self.addCleanup(client.transport.abortConnection)
            welcome = await client.hello()
            assert welcome["device"]["online"] is True
            client.sendClose(1000)
            assert await client.close_code() == 1000

    async def test_rotation_closes_the_socket_4401_and_the_old_token_stops(self) -> None:
        login, token, device = await self.user_with_device()
        client = await self.link(token)
        response = await self.call("POST", f"{DEVICES}/{device['id']}/token", token=login)
        assert response.status == 200
        assert response.json()["token"].startswith("wpc_") and response.json()["token"] != token
        assert await client.close_code() == 4401
        refused = await self.raw_upgrade({"X-Connector-Token": token})
        assert refused.status == 401
        await self.until(lambda: self._offline(device["id"]))

    async def test_deletion_closes_the_socket_4401(self) -> None:
        login, token, device = await self.user_with_device()
        client = await self.link(token)
        response = await self.call("DELETE", f"{DEVICES}/{device['id']}", token=login)
        assert response.json() == {"message": "Device deleted"}
        assert await client.close_code() == 4401

    async def test_a_second_connection_supersedes_the_first_4409(self) -> None:
        login, token, device = await self.user_with_device()
        first = await self.link(token)
        second = await self.link(token)
        assert await first.close_code() == 4409
        task = await self.task_for(device, await self.user_id(login))
        assert (await second.next_of("task"))["task"]["id"] == task.id
        shown = (await self.call("GET", f"{DEVICES}/{device['id']}", token=login)).json()
        assert shown["online"] is True

    async def test_disconnect_mid_task_fails_it_and_goes_offline_at_once(self) -> None:
        login, token, device = await self.user_with_device()
        client = await self.link(token)
        task = await self.task_for(device, await self.user_id(login))
        waiting = self.links_of().tasks.wait(task)
        await client.next_of("task")
        client.transport.abortConnection()
        finished = await waiting
        assert finished is not None
        assert (finished.status, finished.error_message) == ("failed", "connector disconnected")
        await self.until(lambda: self._offline(device["id"]))

    async def test_hello_must_come_within_ten_seconds(self) -> None:
        _, token, _ = await self.user_with_device()
        client = await connect(self.base, token)
        self.addCleanup(client.transport.abortConnection)
        self.clock.advance(10)
        assert await client.close_code() == 4400

    async def _offline(self, device_id: str) -> bool:
        row = await self.app.db.transaction(device_store.get, device_id)
        return row is None or (row.status == "offline" and row.link_id is None)


class BadFrameTests(LinkTestCase):
    async def test_bad_frames_get_clear_errors_and_change_nothing(self) -> None:
        _, token, device = await self.user_with_device()
        client = await connect(self.base, token)
        self.addCleanup(client.transport.abortConnection)
        client.send({"type": "heartbeat"})
        assert (await client.next()) == {"type": "error",
                                         "error": "hello required before heartbeat"}
        client.sendMessage(b"{not json", isBinary=False)
        error = await client.next()
        assert error["type"] == "error" and error["error"].startswith("invalid JSON")
        client.send({"type": "launch_missiles"})
        assert (await client.next())["error"] == "unknown frame type: launch_missiles"
        client.sendMessage(b"[1, 2]", isBinary=False)
        assert (await client.next())["error"] == (
            "a frame must be a JSON object with a string type")
        client.send({"type": "hello", "protocol": 1, "max_parallel": 9})
        assert (await client.next())["error"] == "max_parallel must be an integer between 1 and 8"
        row = await self.app.db.transaction(device_store.get, device["id"])
        assert row is not None and row.status == "offline"
        await client.hello()

        # a result for another device's task is ignored; that task is untouched
        bob_login, _, bob_device = await self.user_with_device("bob")
        bob_task = await self.task_for(bob_device, await self.user_id(bob_login))
        client.send({"type": "task_result", "task_id": bob_task.id, "success": True,
                     "result": "stolen"})
        ack = await client.next_of("task_result_ack")
        assert ack["ignored"] is True and ack["error"] == "task is not running on this device"
        assert (await self.task(bob_task.id)).status == "queued"
        client.send({"type": "task_result", "task_id": bob_task.id, "success": "yes"})
        assert (await client.next())["error"] == "task_result: success must be a boolean"
        client.send({"type": "task_output", "task_id": bob_task.id, "seq": 1,
                     "stream": "stdout", "data": "x"})
        assert (await client.next())["error"] == (
            "task_output for a task not running on this link")
        # the connection is still usable
        client.send({"type": "heartbeat"})
        assert (await client.next())["type"] == "heartbeat_ack"

    async def test_frames_over_one_mebibyte_are_refused(self) -> None:
        _, token, _ = await self.user_with_device()
        client = await self.link(token)
        client.sendMessage(b'{"type":"heartbeat","x":"' + b"a" * (1 << 20) + b'"}',
                           isBinary=False)
        assert await client.close_code() == WebSocketProtocol.CLOSE_STATUS_CODE_MESSAGE_TOO_BIG


class OutputTests(LinkTestCase):
    async def test_task_output_of_a_run_task_is_forwarded_up_to_64_kib(self) -> None:
        login, token, device = await self.user_with_device()
        events: list[dict[str, Any]] = []
        self.links_of().hub.on_output(lambda task, event: events.append(event))
        client = await self.link(token)
        task = await self.task_for(device, await self.user_id(login), run_id="acr-run1",
                                   tool_call_id="call_1")
        await client.next_of("task")
        chunk = "x" * 40_000
        for seq in (1, 2, 3):
            client.send({"type": "task_output", "task_id": task.id, "seq": seq,
                         "stream": "stdout", "data": chunk})
        client.send({"type": "heartbeat"})
        await client.next_of("heartbeat_ack")
        forwarded = sum(len(event["delta"]) for event in events)
        assert forwarded == 64 * 1024
        assert events[-1] == {"task_id": task.id, "tool_call_id": "call_1",
                              "stream": "stdout", "delta": "", "truncated": True}
        assert len(events) == 3
