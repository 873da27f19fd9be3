"""Workspace and web tools that run on the user's connector device (§1.8 step 4, §1.13).

Why through the database: each call becomes one ``connector_tasks`` row (``queued``, or
``pending_approval`` when the approval rule says so) that any node's device link can hand to
the device; the run waits on the row -- re-read every second, so a result recorded on another
node is seen -- for at most 10 minutes from creation (approval time counts).  The device is
woken with a bus message on ``connector-device:<id>``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from twisted.internet.task import deferLater

from gateway.assistant.connector_approval import needs_approval
from gateway.assistant.connector_arguments import SCHEMAS, check_arguments
from gateway.assistant.ids import random_id
from gateway.assistant.tool_set import Tool, ToolFailed, ToolResult
from gateway.store import connector_tasks
from gateway.store.connector_tasks import TaskRow
from gateway.store.pool import DBRunner

TASK = "act"
WAIT_LIMIT = timedelta(minutes=10)
RECHECK_SECONDS = 1.0
TIMED_OUT = "connector task timed out"
ADJUSTED_NOTE = "Note: the user adjusted the tool input before approval.\n"
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


def wake_channel(device_id: str) -> str:
    return f"connector-device:{device_id}"


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

    def describe(self) -> str:
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
    db: DBRunner
    clock: Any
    now: Callable[[], datetime]
    wake: Callable[[str], None]
    target: ConnectorTarget
    #: tool-call id -> (task id, arguments the task was created with)
    created: dict[str, tuple[str, dict[str, Any]]] = field(default_factory=dict)

    def tools(self, switches: dict[str, bool]) -> list[Tool]:
        out = []
        for name, (action, group, switch) in TOOLS.items():
            if not switches.get(switch, True):
                continue
            out.append(Tool(name=name, description=DESCRIPTIONS[action],
                            parameters=SCHEMAS[action], group=group, tool=action,
                            run=self._runner(action), precreate=self._precreator(action)))
        return out

    def _precreator(self, action: str) -> Any:
        async def precreate(arguments: dict[str, Any], call_id: str) -> dict[str, Any] | None:
            payload = check_arguments(action, arguments, self.target.workspace_path)
            target = self.target
            approval = needs_approval(action, target.approval_mode, target.command_prefixes,
                                      str(payload.get("command") or ""))
            task_id = random_id(TASK)
            status = connector_tasks.PENDING_APPROVAL if approval else connector_tasks.QUEUED
            now = self.now()
            await self.db.transaction(lambda conn: connector_tasks.create(
                conn, task_id=task_id, user_id=target.user_id, device_id=target.device_id,
                action=action, payload=payload, workspace_path=target.workspace_path,
                status=status, now=now, run_id=target.run_id, tool_call_id=call_id))
            self.created[call_id] = (task_id, payload)
            if not approval:
                self.wake(target.device_id)
                return None
            return {**arguments, "connector_task_id": task_id}

        return precreate

    def _runner(self, action: str) -> Any:
        async def run(_arguments: dict[str, Any], call_id: str) -> ToolResult:
            task_id, payload = self.created.pop(call_id)
            task = await self._wait(task_id)
            adjusted = task.payload != payload
            note = ADJUSTED_NOTE if adjusted else ""
            if task.status == connector_tasks.FAILED:
                text = f"Connector tool failed: {task.error_message}"
                raise ToolFailed(f"{note}{task.result}\n\n{text}" if task.result
                                 else f"{note}{text}")
            return ToolResult(note + task.result, arguments=task.payload if adjusted else None)

        return run

    async def _wait(self, task_id: str) -> TaskRow:
        deadline = self.now() + WAIT_LIMIT
        while True:
            task = await self.db.transaction(connector_tasks.get, task_id)
            if task is None:
                raise ToolFailed("Connector task unavailable: the task was deleted")
            if task.status in (connector_tasks.COMPLETED, connector_tasks.FAILED):
                return task
            if self.now() >= deadline:
                now = self.now()
                await self.db.transaction(connector_tasks.fail, task_id, TIMED_OUT, now)
            else:
                await deferLater(self.clock, RECHECK_SECONDS, lambda: None)
