"""The JSON shapes of devices and connector tasks (agents contract §2.1, §1.13, §2.3).

Optional timestamps and empty reported fields are omitted (the origin's omit-empty).  Payload
keys the server owns for the UI (previews, sandbox spec details) never reach a device or a
device-task listing.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from gateway.store.connector_tasks import TaskRow
from gateway.store.devices import DeviceRow

#: payload keys stripped from what devices receive and from device-task listings (§1.13)
SERVER_KEYS = frozenset({
    "preview_old_content", "preview_old_content_available", "preview_tool_call_id",
    "connector_task_id", "sandbox_id", "sandbox_backend", "packages",
})
ENV_MASK = "********"


def rfc3339(value: datetime) -> str:
    """RFC 3339 with fractional seconds and ``Z`` (contract §0)."""
    return value.isoformat(timespec="microseconds").replace("+00:00", "Z")


def _put_time(view: dict[str, Any], name: str, value: datetime | None) -> None:
    if value is not None:
        view[name] = rfc3339(value)


def device_view(device: DeviceRow, now: datetime) -> dict[str, Any]:
    online = device.online_at(now)
    view: dict[str, Any] = {"id": device.id, "name": device.name, "remark": device.remark}
    for name in ("hostname", "os", "arch", "version"):
        if getattr(device, name):
            view[name] = getattr(device, name)
    view["kind"] = device.kind
    if device.desktop_instance_id:
        view["desktop_instance_id"] = device.desktop_instance_id
    view["mode"] = device.mode
    if device.listen_port:
        view["listen_port"] = device.listen_port
    view["status"] = "online" if online else "offline"
    view["online"] = online
    _put_time(view, "last_seen_at", device.last_seen_at)
    view["created_at"] = rfc3339(device.created_at)
    view["updated_at"] = rfc3339(device.updated_at)
    return view


def device_payload(payload: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in payload.items() if key not in SERVER_KEYS}


def masked_env(payload: dict[str, Any]) -> dict[str, Any]:
    """``payload`` with a connector MCP ``server.env``'s values shown as ``********``: what
    user-facing listings show (§1.13 [G]; the device itself gets the real values)."""
    server = payload.get("server")
    if not isinstance(server, dict) or not isinstance(server.get("env"), dict):
        return payload
    env = {key: ENV_MASK for key in server["env"]}
    return {**payload, "server": {**server, "env": env}}


def dispatch_view(task: TaskRow) -> dict[str, Any]:
    """What a device receives (WebSocket ``task`` frame, long-poll ``tasks/next``)."""
    return {
        "id": task.id, "action": task.action, "workspace_path": task.workspace_path,
        "workspace_unrestricted": task.workspace_path == "",
        "payload": device_payload(task.payload), "created_at": rfc3339(task.created_at),
    }


def task_view(task: TaskRow) -> dict[str, Any]:
    """The device-task shape (``GET /connector-tasks/:id``, device task lists)."""
    view: dict[str, Any] = {
        "id": task.id, "device_id": task.device_id, "run_id": task.run_id,
        "action": task.action, "workspace_path": task.workspace_path,
        "workspace_unrestricted": task.workspace_path == "",
        "payload": masked_env(device_payload(task.payload)), "status": task.status,
    }
    if task.result:
        view["result"] = task.result
    if task.error_message:
        view["error_message"] = task.error_message
    _put_time(view, "started_at", task.started_at)
    _put_time(view, "finished_at", task.finished_at)
    view["created_at"] = rfc3339(task.created_at)
    view["updated_at"] = rfc3339(task.updated_at)
    return view
