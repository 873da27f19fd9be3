"""``/api/user/advanced-chat/connector-tasks`` -- the one route group for connector tasks
(agents contract §1.13): bad input is a clear 400 that changes nothing, another user's task
is missing, and an adjusted input keeps the server-owned keys ([P-15])."""

from __future__ import annotations

from typing import Any

from gateway.store import connector_tasks as task_store
from tests.gateway.links.link_case import LinkTestCase

TASKS = "/api/user/advanced-chat/connector-tasks"


class DecisionRouteTests(LinkTestCase):
    async def pending_task(self) -> tuple[str, Any, dict[str, Any]]:
        login, _token, device = await self.user_with_device()
        user_id = await self.user_id(login)
        task = await self.task_for(
            device, user_id, needs_approval=True, workspace_path="/home/a/proj",
            payload={"command": "rm -rf build", "timeout_sec": 30,
                     "connector_task_id": "act-original", "preview_tool_call_id": "call_1"})
        return login, task, device

    async def test_bad_bodies_answer_400_and_change_nothing(self) -> None:
        login, task, _ = await self.pending_task()
        cases: list[tuple[Any, str]] = [
            ({"approved": "yes"}, "approved must be a boolean"),
            ({}, "approved must be a boolean"),
            ({"approved": True, "input": "ls"}, "input must be an object"),
            ({"approved": True, "input": {"command": ""}},
             "Invalid adjusted input: command must be a non-empty string"),
            ({"approved": True, "input": {"command": "ls", "timeout_sec": 121}},
             "Invalid adjusted input: timeout_sec must be an integer between 1 and 120"),
        ]
        for body, message in cases:
            answer = await self.call("POST", f"{TASKS}/{task.id}/decision", body, token=login)
            assert answer.status == 400, (body, answer)
            assert answer.json()["error"].startswith(message), (body, answer)
        after = await self.task(task.id)
        assert (after.status, after.payload) == (task_store.PENDING_APPROVAL, task.payload)

    async def test_another_users_task_is_missing(self) -> None:
        _, task, _ = await self.pending_task()
        mallory = (await self.register("mallory"))["token"]
        for method, path, body in (("GET", f"{TASKS}/{task.id}", None),
                                   ("POST", f"{TASKS}/{task.id}/decision", {"approved": True})):
            answer = await self.call(method, path, body, token=mallory)
            assert (answer.status, answer.json()["error"]) == (404, "Connector task not found")
        assert (await self.task(task.id)).status == task_store.PENDING_APPROVAL

    async def test_adjusted_input_keeps_server_owned_keys_and_denial_ignores_it(self) -> None:
        login, task, device = await self.pending_task()
        answer = await self.call("POST", f"{TASKS}/{task.id}/decision", {
            "approved": True, "input": {"command": "ls build",
                                        "connector_task_id": "act-forged",
                                        "preview_tool_call_id": "call_forged"}}, token=login)
        assert answer.json() == {"ok": True, "status": "queued"}, answer
        after = await self.task(task.id)
        assert after.payload == {"command": "ls build", "timeout_sec": 30,
                                 "connector_task_id": "act-original",
                                 "preview_tool_call_id": "call_1"}
        again = await self.call("POST", f"{TASKS}/{task.id}/decision", {"approved": False},
                                token=login)
        assert (again.status, again.json()["status"]) == (409, "queued")
        second = await self.task_for(device, after.user_id, needs_approval=True)
        denied = await self.call("POST", f"{TASKS}/{second.id}/decision",
                                 {"approved": False, "input": {"command": "id"}}, token=login)
        assert denied.json() == {"ok": True, "status": "failed"}
        row = await self.task(second.id)
        assert (row.payload, row.error_message) == (second.payload, "denied by user")
