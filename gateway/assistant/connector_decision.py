"""Adjusted input on an approved connector task (agents contract §1.13, [P-15]).

An approved task may carry adjusted input: it replaces the tool arguments after the same check
fresh arguments get; the action and the server-owned keys cannot change.  The waiting run sees
the new payload when the device's result arrives and tells the model the input was adjusted.
"""

from __future__ import annotations

from typing import Any

from gateway.assistant.connector_arguments import check_arguments
from gateway.assistant.tool_set import BadArguments
from gateway.store.connector_tasks import TaskRow

SERVER_OWNED = ("cloud_sandbox_id", "cloud_sandbox_spec", "connector_task_id")


class InvalidAdjustment(ValueError):
    """The adjusted input fails the check fresh tool arguments get (its text is the reason)."""


def adjusted_payload(task: TaskRow, given: dict[str, Any]) -> dict[str, Any]:
    """``given`` checked as ``task.action``'s arguments, with the server-owned keys of the
    original payload kept."""
    try:
        payload = check_arguments(task.action, given, task.workspace_path)
    except BadArguments as exc:
        raise InvalidAdjustment(f"Invalid adjusted input: {exc}") from None
    for key, value in task.payload.items():
        if key in SERVER_OWNED or key.startswith("preview_"):
            payload[key] = value
    return payload
