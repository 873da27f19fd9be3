"""``/api/user/advanced-chat/devices``: the caller's connector devices (agents contract §2.1,
[P-16]…[P-18]) and their tasks (§1.13 origin extras).

Lookups are by ``(id, current user)`` and hidden host devices are never visible here, so
another user's device -- or a host device -- answers exactly like a missing one (404).  The
plaintext token is returned once (create/rotate); rotating or deleting closes the device's live
socket with 4401 wherever it is.
"""

from __future__ import annotations

from typing import Any

from console.context import ConsoleContext
from console.http import ApiError, bad_request, json_route, make_app, read_object
from console.services.assistant.device_mcp import device_mcp_call
from console.services.identity.sessions import SessionUser
from gateway.links import ids
from gateway.links.hub import CLOSE_REVOKED
from gateway.links.tasks import TaskNotActive
from gateway.links.views import device_view, task_view
from gateway.store import connector_tasks as task_store
from gateway.store import devices as device_store
from gateway.store.devices import DeviceRow

NOT_FOUND = "Device not found"
NAME_REQUIRED = "Device name is required"
NOT_ACTIVE = "Connector task is not active or was not found"
DEFAULT_PORT = 8080


def device_name(body: dict[str, Any]) -> str:
    name = body.get("name")
    if name is not None and not isinstance(name, str):
        raise bad_request("name must be a string", field="name")
    name = (name or "").strip()
    if not name:
        raise bad_request(NAME_REQUIRED, field="name")
    return name[:120]


def device_remark(body: dict[str, Any]) -> str | None:
    remark = body.get("remark")
    if remark is None:
        return None
    if not isinstance(remark, str):
        raise bad_request("remark must be a string", field="remark")
    return remark.strip()[:200]


def device_mode(body: dict[str, Any]) -> tuple[str, int]:
    """``web_server`` (with ``listen_port``, default 8080) or ``platform`` -- never sandboxd."""
    if body.get("mode") != "web_server":
        return "platform", 0
    port = body.get("listen_port", DEFAULT_PORT)
    if port in (None, 0):
        port = DEFAULT_PORT
    if isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= 65535:
        raise bad_request("listen_port must be an integer between 1 and 65535",
                          field="listen_port")
    return "web_server", port


def task_limit(request: Any) -> int:
    raw = request.args.get(b"limit", [b""])[0].decode("ascii", "replace").strip()
    if not raw:
        return 50
    if not raw.isascii() or not raw.isdigit() or not 1 <= int(raw) <= 200:
        raise bad_request("limit must be between 1 and 200", field="limit")
    return int(raw)


class DeviceRoutes:
    """Mounted at ``/api/user/advanced-chat/devices``."""

    app = make_app()

    def __init__(self, ctx: ConsoleContext) -> None:
        self.ctx = ctx

    async def _own(self, request: Any, device_id: str) -> tuple[SessionUser, DeviceRow]:
        user = await self.ctx.sessions.user(request)
        device = await self.ctx.db.transaction(device_store.get_for_user, user["id"], device_id)
        if device is None:
            raise ApiError(404, NOT_FOUND)
        return user, device

    @app.route("/", methods=["GET"])
    @json_route
    async def index(self, request: Any) -> list[dict[str, Any]]:
        user = await self.ctx.sessions.user(request)
        rows = await self.ctx.db.transaction(device_store.list_for_user, user["id"])
        now = self.ctx.now()
        return [device_view(row, now) for row in rows]

    @app.route("/token", methods=["POST"])
    @json_route
    async def create(self, request: Any) -> dict[str, Any]:
        user = await self.ctx.sessions.user(request)
        body = read_object(request)
        name, remark = device_name(body), device_remark(body) or ""
        mode, port = device_mode(body)
        token = ids.new_token()
        row = await self.ctx.db.transaction(
            device_store.create, device_id=ids.new_id(ids.DEVICE), user_id=user["id"],
            name=name, remark=remark, mode=mode, listen_port=port,
            token_hash=ids.token_hash(token), hidden=False, now=self.ctx.now())
        return {"token": token, "device": device_view(row, self.ctx.now())}

    @app.route("/<device_id>", methods=["GET"])
    @json_route
    async def show(self, request: Any, device_id: str) -> dict[str, Any]:
        _, device = await self._own(request, device_id)
        return device_view(device, self.ctx.now())

    @app.route("/<device_id>/token", methods=["POST"])
    @json_route
    async def rotate(self, request: Any, device_id: str) -> dict[str, Any]:
        _, device = await self._own(request, device_id)
        token = ids.new_token()
        await self.ctx.db.transaction(device_store.set_token, device.id,
                                      ids.token_hash(token), self.ctx.now())
        self.ctx.agent_links.hub.close_device(device.id, CLOSE_REVOKED, "token revoked")
        row = await self.ctx.db.transaction(device_store.get, device.id)
        assert row is not None
        return {"token": token, "device": device_view(row, self.ctx.now())}

    @app.route("/<device_id>", methods=["PUT"])
    @json_route
    async def update(self, request: Any, device_id: str) -> dict[str, Any]:
        body = read_object(request)
        _, device = await self._own(request, device_id)
        name, remark = device_name(body), device_remark(body)
        await self.ctx.db.transaction(device_store.rename, device.id, name, remark,
                                      self.ctx.now())
        row = await self.ctx.db.transaction(device_store.get, device.id)
        assert row is not None
        return device_view(row, self.ctx.now())

    @app.route("/<device_id>", methods=["DELETE"])
    @json_route
    async def delete(self, request: Any, device_id: str) -> dict[str, Any]:
        user = await self.ctx.sessions.user(request)
        device = await self.ctx.db.transaction(device_store.get_for_user, user["id"], device_id)
        if device is not None:
            await self.ctx.db.transaction(device_store.remove, device.id)
            self.ctx.agent_links.hub.close_device(device.id, CLOSE_REVOKED, "device deleted")
        return {"message": "Device deleted"}

    @app.route("/<device_id>/tasks", methods=["GET"])
    @json_route
    async def tasks(self, request: Any, device_id: str) -> list[dict[str, Any]]:
        limit = task_limit(request)
        _, device = await self._own(request, device_id)
        rows = await self.ctx.db.transaction(task_store.list_for_device, device.id, limit)
        return [task_view(row) for row in rows]

    @app.route("/<device_id>/tasks/<task_id>/cancel", methods=["POST"])
    @json_route
    async def cancel(self, request: Any, device_id: str, task_id: str) -> dict[str, Any]:
        user, device = await self._own(request, device_id)
        task = await self.ctx.db.transaction(task_store.get_for_user, user["id"], task_id)
        if task is None or task.device_id != device.id:
            raise ApiError(409, NOT_ACTIVE)
        try:
            await self.ctx.agent_links.tasks.cancel(task.id)
        except TaskNotActive:
            raise ApiError(409, NOT_ACTIVE) from None
        return {"ok": True}

    @app.route("/<device_id>/mcp-processes", methods=["GET"])
    @json_route
    async def mcp_processes(self, request: Any, device_id: str) -> Any:
        user, device = await self._own(request, device_id)
        return await device_mcp_call(self.ctx, user["id"], device, "list_mcp_processes", {})

    @app.route("/<device_id>/mcp-processes/stop", methods=["POST"])
    @json_route
    async def stop_mcp_process(self, request: Any, device_id: str) -> Any:
        user, device = await self._own(request, device_id)
        body = read_object(request)
        key = body.get("key")
        if not isinstance(key, str) or not key.strip():
            raise bad_request("key is required", field="key")
        return await device_mcp_call(self.ctx, user["id"], device, "stop_mcp_process",
                                     {"key": key})
