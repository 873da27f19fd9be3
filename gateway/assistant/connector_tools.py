"""Workspace and web tools that run on the user's connector device (§1.8 step 4, §1.13).

Why through the links' ``ConnectorTasks`` service: each call becomes one ``connector_tasks``
row (``queued``, or ``pending_approval`` when the approval rule says so) created, decided and
cancelled by the same service the device routes and both device transports use, so the device
is woken at once on whatever node holds its link, and the run's wait fires the moment the
result (recorded on any node) commits -- with the service's 10-minute deadline from creation
(approval time counts).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gateway.assistant.approval_checker import ApprovalChecker
from gateway.assistant.connector_approval import needs_approval
from gateway.assistant.connector_arguments import SCHEMAS, check_arguments
from gateway.assistant.sandbox_binding import (
    SANDBOX_DESCRIPTIONS,
    SandboxTarget,
    refused_text,
    sandbox_payload,
)
from gateway.assistant.tool_set import Tool, ToolFailed, ToolResult
from gateway.links.tasks import ConnectorTasks
from gateway.sandboxes.gate import SandboxRefused
from gateway.store import connector_tasks
from gateway.store.connector_tasks import TaskRow

ADJUSTED_NOTE = "Note: the user adjusted the tool input before approval.\n"
#: how long a ``write_file`` awaiting approval waits for the old content of its file (§1.13)
PREVIEW_SECONDS = 5.0
#: tool name -> (device action, tool group, admin switch field)
TOOLS: dict[str, tuple[str, str, str]] = {
    "workspace_list_files": ("list_files", "workspace", "list_files"),
    "workspace_read_file": ("read_file", "workspace", "read_file"),
    "workspace_write_file": ("write_file", "workspace", "write_file"),
    "workspace_replace_text": ("replace_text", "workspace", "replace_text"),
    "workspace_run_command": ("run_command", "workspace", "run_command"),
    "workspace_web_search": ("web_search", "web", "web_search"),
    "workspace_web_fetch": ("web_fetch", "web", "web_search"),
}
DESCRIPTIONS = {
    "list_files": "List a directory on the user's connected device.",
    "read_file": "Read a text file on the user's connected device.",
    "write_file": "Write a file on the user's connected device.",
    "replace_text": "Replace exact text in a file on the user's connected device.",
    "run_command": "Run a shell command on the user's connected device.",
    "web_search": "Search the web from the user's connected device.",
    "web_fetch": "Fetch a web page's readable text from the user's connected device.",
}


@dataclass
class ConnectorTarget:
    """The device, workspace and approval binding of one run."""

    user_id: int
    run_id: str
    device_id: str
    device_name: str
    os: str
    arch: str
    workspace_path: str
    approval_mode: str
    command_prefixes: list[str]
    #: a cloud sandbox run: tasks go to its host's device with the gate's payload keys
    sandbox: SandboxTarget | None = None

    def describe(self) -> str:
        if self.sandbox is not None:
            return self.sandbox.describe()
        where = (f"the workspace {self.workspace_path} (paths are relative to it)"
                 if self.workspace_path else "no workspace (paths must be absolute)")
        system = "/".join(part for part in (self.os, self.arch) if part) or "unknown system"
        approval = {"full_access": "Tool calls run without approval.",
                    "assistant": "Commands and file changes are checked before they run."}.get(
            self.approval_mode, "File changes and commands that are not allow-listed wait for "
                                "the user's approval.")
        return (f"Connected device: {self.device_name} ({system}), with {where}. {approval}")


@dataclass
class ConnectorTools:
    tasks: ConnectorTasks
    target: ConnectorTarget
    #: tool-call id -> (the task as created, the payload it was created with)
    created: dict[str, tuple[TaskRow, dict[str, Any]]] = field(default_factory=dict)
    #: approval mode ``assistant``: decides tasks awaiting approval before the owner could
    checker: ApprovalChecker | None = None

    def tools(self, switches: dict[str, bool]) -> list[Tool]:
        out = []
        for name, (action, group, switch) in TOOLS.items():
            if not switches.get(switch, True):
                continue
            texts = DESCRIPTIONS if self.target.sandbox is None else SANDBOX_DESCRIPTIONS
            out.append(Tool(name=name, description=texts[action],
                            parameters=SCHEMAS[action], group=group, tool=action,
                            run=self._runner(action), precreate=self._precreator(action)))
        return out

    def _precreator(self, action: str) -> Any:
        async def precreate(arguments: dict[str, Any], call_id: str) -> dict[str, Any] | None:
            payload = check_arguments(action, arguments, self.target.workspace_path)
            target = self.target
            approval = needs_approval(action, target.approval_mode, target.command_prefixes,
                                      str(payload.get("command") or ""))
            if approval and action == "write_file":
                payload = {**payload, **await self._preview(payload, call_id)}
            sandbox, now = target.sandbox, self.tasks.now()

            def sandboxed(conn: Any) -> dict[str, Any]:
                assert sandbox is not None
                return sandbox_payload(conn, target.user_id, sandbox, payload, now)

            try:
                task = await self.tasks.create(
                    user_id=target.user_id, device_id=target.device_id, action=action,
                    payload=payload, workspace_path=target.workspace_path, run_id=target.run_id,
                    tool_call_id=call_id, needs_approval=approval,
                    cloud_sandbox_id=sandbox.sandbox_id if sandbox else "",
                    payload_in_tx=sandboxed if sandbox is not None else None)
            except SandboxRefused as refusal:
                raise ToolFailed(refused_text(refusal)) from None
            self.created[call_id] = (task, task.payload)
            if not approval:
                return None
            previews = {k: v for k, v in payload.items() if k.startswith("preview_")}
            return {**arguments, **previews, "connector_task_id": task.id}

        return precreate

    async def _preview(self, payload: dict[str, Any], call_id: str) -> dict[str, Any]:
        """§1.13: before a ``write_file`` awaiting approval is created, a ``read_file`` of the
        same path (at most ``PREVIEW_SECONDS``) gives the owner the old content to diff
        against.  A missing file, a device error or no answer in time: not available."""
        target = self.target
        preview: dict[str, Any] = {"preview_old_content": "",
                                   "preview_old_content_available": False,
                                   "preview_tool_call_id": call_id}
        read = await self.tasks.create(
            user_id=target.user_id, device_id=target.device_id, action="read_file",
            payload={"path": payload["path"]}, workspace_path=target.workspace_path,
            run_id=target.run_id)
        done = await self.tasks.wait(read, PREVIEW_SECONDS)
        if done is not None and done.status == connector_tasks.COMPLETED:
            preview.update(preview_old_content=done.result, preview_old_content_available=True)
        return preview

    def _runner(self, action: str) -> Any:
        async def run(_arguments: dict[str, Any], call_id: str) -> ToolResult:
            created, payload = self.created.pop(call_id)
            if self.checker is not None:
                await self.checker.review(created.id)
            task = await self.tasks.wait(created)
            if task is None:
                raise ToolFailed("Connector task unavailable: the task was deleted")
            adjusted = task.payload != payload
            note = ADJUSTED_NOTE if adjusted else ""
            if task.status == connector_tasks.FAILED:
                text = f"Connector tool failed: {task.error_message}"
                raise ToolFailed(f"{note}{task.result}\n\n{text}" if task.result
                                 else f"{note}{text}")
            return ToolResult(note + task.result, arguments=task.payload if adjusted else None)

        return run
