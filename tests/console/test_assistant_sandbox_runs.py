"""Assistant runs in a cloud sandbox (agents contract §1.8 step 1, §3.5).

A real Lockgate on SQLite with a sandbox host (its hidden ``sandboxd`` device online through a
link), the user's sandbox, and the tool-calling upstream: the run's connector tools are bound
to the host's device with ``full_access`` and no workspace, every task carries the two
server-owned keys, and the gate's refusals become tool failures.
"""

from __future__ import annotations

import secrets
from typing import Any

from sqlalchemy import select
from twisted.internet import reactor
from twisted.internet.task import deferLater

from gateway.assistant.ids import random_id
from gateway.store import cloud_sandboxes, connector_tasks, devices, sandbox_hosts, schema
from gateway.store.connector_tasks import TaskRow
from tests.console.test_assistant_completions import AssistantCase, cost_nanos
from tests.support.tool_upstream import HANG, tool_call

POLICY = '{"network": "none"}'


class SandboxRunTests(AssistantCase):
    async def host_and_sandbox(self, *, enabled: bool = True, online: bool = True
                               ) -> tuple[str, str]:
        """(host device id, sandbox id) of a host owned by the admin and a sandbox of the
        user's on it."""
        now = self.ctx.now()
        users = schema.users

        def run(conn: Any) -> tuple[str, str]:
            admin = int(conn.execute(select(users.c.id).where(
                users.c.username == "admin")).scalar_one())
            device = devices.create(
                conn, device_id=random_id("acd"), user_id=admin, name="host-1", remark="",
                mode=devices.SANDBOXD, listen_port=0, token_hash=secrets.token_hex(32),
                hidden=True, now=now)
            host = sandbox_hosts.create(
                conn, host_id=random_id("ash"), device_id=device.id, name="host-1",
                created_by=admin, enabled=enabled, security_policy=POLICY, prices={},
                now=now)
            if online:
                devices.report(conn, device, {}, now, link_id=f"test/{device.id}")
            sandbox = cloud_sandboxes.create(
                conn, sandbox_id=random_id("acs"), user_id=self.user_id, host_id=host.id,
                name="box", image="python:3.12-slim", cpu_cores_nanos=1_500_000_000,
                memory_mb=2048, disk_gb=10, now=now)
            return device.id, sandbox.id

        return await self.ctx.db.transaction(run)

    async def host_runs_next(self, device_id: str, output: str) -> TaskRow:
        """Act as the host: claim the next queued task (any user's) and report a result."""
        for _ in range(1500):  # ~30 s: the machine may be busy
            now = self.ctx.now()

            def work(conn: Any) -> TaskRow | None:
                task = connector_tasks.claim_next(conn, device_id, None, "http", now)
                if task is not None:
                    connector_tasks.finish(conn, task.id, device_id, success=True,
                                           result=output, error_message="", output={},
                                           now=now)
                return task

            task = await self.ctx.db.transaction(work)
            if task is not None:
                return task
            await deferLater(reactor, 0.02, lambda: None)
        raise AssertionError("no task was queued for the host")

    async def test_run_command_goes_to_the_host_with_the_server_owned_keys(self) -> None:
        await self.provision()
        device_id, sandbox_id = await self.host_and_sandbox()
        self.upstream.script(tool_call("workspace_run_command", {"command": "python -V"}))
        started = await self.complete({
            "messages": [{"role": "user", "content": "version?"}], "mode": "assistant",
            "cloud_sandbox_id": sandbox_id, "connector_approval_mode": "manual"})
        assert started.status == 202, started
        session = started.json()["session"]
        assert session["cloud_sandbox_id"] == sandbox_id
        assert session["connector_approval_mode"] == "full_access"
        run_id = started.json()["run"]["id"]
        task = await self.host_runs_next(device_id, "Python 3.12.1")
        # full_access: queued at once (no approval), no workspace, the sandbox owner's task
        assert (task.action, task.user_id, task.workspace_path, task.run_id) == (
            "run_command", self.user_id, "", run_id)
        assert task.payload == {
            "command": "python -V", "timeout_sec": 30, "cloud_sandbox_id": sandbox_id,
            "cloud_sandbox_spec": {"image": "python:3.12-slim", "cpu_cores": "1.5",
                                   "memory_mb": 2048, "disk_gb": 10,
                                   "security_policy": task.payload["cloud_sandbox_spec"][
                                       "security_policy"]}}
        assert isinstance(task.payload["cloud_sandbox_spec"]["security_policy"], dict)
        self.clock.advance(1)  # the run re-reads its task every second
        finished = await self.wait_for_run(run_id)
        assert finished["status"] == "completed", finished
        [detail] = finished["tool_call_details"]
        assert (detail["status"], detail["result"]) == ("ok", "Python 3.12.1")
        # the model was told where it works; paths are relative to the sandbox workspace
        first = self.upstream.requests[0]
        assert "Cloud sandbox: box." in first["messages"][0]["content"]
        offered = {t["function"]["name"]: t["function"]["description"] for t in first["tools"]}
        assert "relative to the sandbox workspace" in offered["workspace_read_file"]
        assert "workspace_list_windows_drives" not in offered
        count, total = await self.usage_cost()
        assert count == 2 and cost_nanos(finished["cost"]) == total

    async def test_a_sandbox_deleted_mid_run_fails_the_next_tool_call(self) -> None:
        await self.provision()
        _device_id, sandbox_id = await self.host_and_sandbox()
        self.upstream.script(HANG)
        started = await self.complete({
            "messages": [{"role": "user", "content": "go"}], "mode": "assistant",
            "cloud_sandbox_id": sandbox_id})
        assert started.status == 202, started
        await self.upstream.hung
        deleted = await self.call("DELETE", f"/api/user/advanced-chat/cloud-sandboxes/"
                                  f"{sandbox_id}", token=self.user_token)
        assert deleted.status == 200, deleted
        self.upstream.release(tool_call("workspace_list_files", {"path": "."}))
        finished = await self.wait_for_run(started.json()["run"]["id"])
        assert finished["status"] == "completed", finished
        [detail] = finished["tool_call_details"]
        assert (detail["status"], detail["result"]) == (
            "error", "Connector task unavailable: cloud sandbox is unavailable")
        tasks = await self.ctx.db.transaction(lambda conn: conn.execute(
            select(schema.connector_tasks.c.id).where(
                schema.connector_tasks.c.run_id == finished["id"])).all())
        assert tasks == []

    async def test_an_empty_wallet_refuses_the_sandbox_task(self) -> None:
        await self.provision()
        _device_id, sandbox_id = await self.host_and_sandbox()
        self.upstream.script(HANG)
        started = await self.complete({
            "messages": [{"role": "user", "content": "go"}], "mode": "assistant",
            "cloud_sandbox_id": sandbox_id})
        assert started.status == 202, started
        await self.upstream.hung
        await self.set_balance(self.user_id, "0")
        self.upstream.release(tool_call("workspace_run_command", {"command": "ls"}))
        finished = await self.wait_for_run(started.json()["run"]["id"])
        [detail] = finished["tool_call_details"]
        assert (detail["status"], detail["result"]) == (
            "error", "Connector task unavailable: insufficient balance for cloud sandbox usage")

    async def test_preparation_refuses_an_unusable_sandbox(self) -> None:
        await self.provision()
        base = {"messages": [{"role": "user", "content": "x"}], "mode": "assistant"}
        _device, disabled = await self.host_and_sandbox(enabled=False)
        _device, offline = await self.host_and_sandbox(online=False)
        cases = [("acs-missing", "Cloud sandbox is unavailable"),
                 (disabled, "Cloud sandbox is unavailable"),
                 (offline, "Cloud sandbox host is offline")]
        for sandbox_id, message in cases:
            answer = await self.complete({**base, "cloud_sandbox_id": sandbox_id})
            assert (answer.status, answer.json()["error"]) == (400, message), answer
        assert self.upstream.requests == []
        # chat mode ignores the execution target
        chat = await self.complete({"messages": [{"role": "user", "content": "x"}],
                                    "cloud_sandbox_id": "acs-missing"})
        assert chat.status == 200, chat

    async def test_saving_a_session_refuses_an_unusable_sandbox(self) -> None:
        """§1.6 "Validation: ... 400 ``Cloud sandbox is unavailable``" and §3.4 "After
        deletion the sandbox can no longer be selected (``Cloud sandbox is unavailable``) by
        sessions": missing, another user's, deleted, or on a disabled host; nothing saved.  A
        usable sandbox on an offline host may be saved (only a run needs the host online)."""
        await self.provision()
        _device, usable = await self.host_and_sandbox(online=False)
        _device, disabled = await self.host_and_sandbox(enabled=False)
        _device, deleted = await self.host_and_sandbox()
        gone = await self.call("DELETE", f"/api/user/advanced-chat/cloud-sandboxes/{deleted}",
                               token=self.user_token)
        assert gone.status == 200, gone
        other = await self.register("sandboxother")
        path = "/api/user/advanced-chat/sessions/s-box"
        for token, sandbox_id in [(self.user_token, "acs-missing"), (other["token"], usable),
                                  (self.user_token, disabled), (self.user_token, deleted)]:
            for method, target in (("PUT", path), ("POST", "/api/user/advanced-chat/sessions")):
                answer = await self.call(method, target, token=token, json={
                    "id": "s-box", "run_mode": "assistant", "cloud_sandbox_id": sandbox_id})
                assert (answer.status, answer.json()["error"]) == (
                    400, "Cloud sandbox is unavailable"), (sandbox_id, answer)
        listed = await self.call("GET", "/api/user/advanced-chat/sessions",
                                 token=self.user_token)
        assert listed.json() == []
        saved = await self.call("PUT", path, token=self.user_token, json={
            "run_mode": "assistant", "cloud_sandbox_id": usable,
            "connector_approval_mode": "manual"})
        assert saved.status == 200, saved
        assert saved.json()["cloud_sandbox_id"] == usable
        assert saved.json()["connector_approval_mode"] == "full_access"  # a sandbox forces it
