"""The device MCP-process routes' proxy: one management task, answered within 20 s (§1.3).

Why a task: the processes live on the device, so ``list_mcp_processes`` / ``stop_mcp_process``
go as connector tasks (no run, no approval) through the links' service and the route waits
for the device's answer.  An offline device is refused before anything is queued.
"""

from __future__ import annotations

from typing import Any

import orjson

from console.context import ConsoleContext
from console.http import ApiError
from gateway.store import connector_tasks as task_store
from gateway.store.devices import DeviceRow

#: how long the route waits for the device (§1.3)
WAIT_SECONDS = 20.0
OFFLINE = "Connector device is offline"


async def device_mcp_call(ctx: ConsoleContext, user_id: int, device: DeviceRow, action: str,
                          payload: dict[str, Any]) -> Any:
    """The device's JSON answer; 409 offline, 504 no answer in time, 502 a device error."""
    if not device.online_at(ctx.now()):
        raise ApiError(409, OFFLINE)
    tasks = ctx.agent_links.tasks
    created = await tasks.create(user_id=user_id, device_id=device.id, action=action,
                                 payload=payload)
    task = await tasks.wait(created, WAIT_SECONDS)
    if task is None or task.status != task_store.COMPLETED:
        message = task.error_message if task is not None else "the task was deleted"
        if message == "connector task timed out":
            raise ApiError(504, "Connector device did not answer in time")
        raise ApiError(502, message or "connector task failed")
    try:
        return orjson.loads(task.result)
    except orjson.JSONDecodeError:
        raise ApiError(502, "the device sent a result that is not JSON") from None



