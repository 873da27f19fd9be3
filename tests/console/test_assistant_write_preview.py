"""What the owner sees before deciding a ``write_file`` (agents contract §1.13).

"Before a ``write_file`` needing approval is created, the server tries (5 s) a ``read_file`` of
the same path and adds ``preview_old_content`` / ``preview_old_content_available`` to the
arguments (for a diff in the UI); it also adds ``preview_tool_call_id``, and after creation
``connector_task_id``.  These keys ... are stripped from payloads sent to devices and from
device-task listings; the pending-approval list shows the full payload."

A real Lockgate on SQLite, the tool-calling upstream, and the test acting as the device
through the task store (the run re-reads its tasks every second on the test Clock).
"""

from __future__ import annotations

from typing import Any

from twisted.internet import reactor
from twisted.internet.task import deferLater

from gateway.store import connector_tasks
from tests.console import test_assistant_completions as completions
from tests.support.tool_upstream import text, tool_call

PREVIEW_KEYS = ("preview_old_content", "preview_old_content_available",
                "preview_tool_call_id")


class WritePreviewTests(completions.AssistantCase):
    linked_device = completions.ConnectorToolTests.linked_device
    wait_for_pending = completions.ConnectorToolTests.wait_for_pending
    preview_read_times_out = completions.ConnectorToolTests.preview_read_times_out

    async def device_answers(self, action: str, *, success: bool, result: str = "",
                             error: str = "") -> dict[str, Any]:
        """Act as the device: claim the next queued task (it must be ``action``) and report."""
        for _ in range(1500):  # ~30 s: the machine may be busy
            now = self.ctx.now()

            def work(conn: Any) -> Any:
                task = connector_tasks.claim_next(conn, "acd-laptop", self.user_id, "http",
                                                  now)
                if task is not None:
                    connector_tasks.finish(conn, task.id, "acd-laptop", success=success,
                                           result=result, error_message=error, output={},
                                           now=now)
                return task

            task = await self.ctx.db.transaction(work)
            if task is not None:
                assert task.action == action, task
                self.clock.advance(1)  # the run re-reads its task every second
                return dict(task.payload)
            await deferLater(reactor, 0.02, lambda: None)
        raise AssertionError(f"no {action} task was queued")

    async def start_write(self) -> str:
        await self.provision()
        await self.linked_device()
        self.upstream.script(tool_call("workspace_write_file",
                                       {"path": "notes/a.txt", "content": "new text"}),
                             text("Written."))
        started = await self.complete({
            "messages": [{"role": "user", "content": "write"}], "mode": "assistant",
            "connector_device_id": "acd-laptop", "connector_workspace_path": "/w"})
        assert started.status == 202, started
        return str(started.json()["run"]["id"])

    async def test_the_old_content_is_shown_and_never_reaches_the_device(self) -> None:
        run_id = await self.start_write()
        read = await self.device_answers("read_file", success=True, result="old text")
        assert read == {"path": "notes/a.txt"}
        [pending] = await self.wait_for_pending(run_id)
        payload = pending["payload"]
        assert (payload["path"], payload["content"]) == ("notes/a.txt", "new text")
        assert {k: payload[k] for k in PREVIEW_KEYS} == {
            "preview_old_content": "old text", "preview_old_content_available": True,
            "preview_tool_call_id": "call_1"}
        first = next(e for e in await self.events(run_id) if e["event"] == "tool_call")
        assert first["payload"]["status"] == "approval_required"
        assert first["payload"]["arguments"] == {
            "path": "notes/a.txt", "content": "new text", "preview_old_content": "old text",
            "preview_old_content_available": True, "preview_tool_call_id": "call_1",
            "connector_task_id": pending["id"]}
        listed = await self.call("GET", f"/api/user/advanced-chat/connector-tasks/"
                                 f"{pending['id']}", token=self.user_token)
        assert not set(PREVIEW_KEYS) & set(listed.json()["payload"]), listed.json()
        decided = await self.call("POST", f"/api/user/advanced-chat/connector-tasks/"
                                  f"{pending['id']}/decision", {"approved": True},
                                  token=self.user_token)
        assert decided.json() == {"ok": True, "status": "queued"}
        await self.device_answers("write_file", success=True, result="wrote 8 bytes")
        finished = await self.wait_for_run(run_id)
        assert finished["status"] == "completed", finished
        [detail] = finished["tool_call_details"]
        assert (detail["status"], detail["result"]) == ("ok", "wrote 8 bytes")

    async def test_a_missing_file_gives_no_old_content(self) -> None:
        run_id = await self.start_write()
        await self.device_answers("read_file", success=False, error="file not found")
        [pending] = await self.wait_for_pending(run_id)
        assert {k: pending["payload"][k] for k in PREVIEW_KEYS} == {
            "preview_old_content": "", "preview_old_content_available": False,
            "preview_tool_call_id": "call_1"}
        stopped = await self.call("POST", f"/api/user/advanced-chat/runs/{run_id}/stop",
                                  token=self.user_token)
        assert stopped.json()["status"] == "cancelled"

    async def test_a_device_silent_for_5_s_gives_no_old_content(self) -> None:
        """The read is failed as timed out; the write still awaits approval."""
        run_id = await self.start_write()
        await self.preview_read_times_out(run_id)
        [pending] = await self.wait_for_pending(run_id)
        assert pending["payload"]["preview_old_content_available"] is False
        [read] = [t for t in await self.ctx.db.transaction(
            connector_tasks.list_for_device, "acd-laptop", 50)
            if t.run_id == run_id and t.action == "read_file"]
        assert (read.status, read.error_message) == ("failed", "connector task timed out")
