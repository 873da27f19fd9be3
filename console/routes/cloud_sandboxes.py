"""The user's cloud sandboxes: list, create, get, delete, charges (agents contract §3.4, §3.6).

Every lookup is by ``(id, user)``: another user's sandbox answers ``404 Cloud sandbox not
found`` exactly like a missing one ([P-27]; the charges route too, for deleted sandboxes of the
user it still answers).  A sandbox is created only on an enabled host that is online now
([P-26]) and within its available range ([P-24]).  Deleting one settles its storage up to now,
fails its waiting tasks and queues the host's cleanup task in one transaction ([P-28]).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from console.context import ConsoleContext
from console.http import ApiError, json_route, make_app, read_object
from console.services.sandboxes.create_input import (
    HOST_UNAVAILABLE,
    check_image,
    required_fields,
    sandbox_size,
)
from console.services.sandboxes.views import charge_view, sandbox_view
from gateway.assistant.ids import random_id
from gateway.invalidation import USERS
from gateway.sandboxes.host_policy import available_range, parse_policy
from gateway.sandboxes.host_state import host_online
from gateway.store import cloud_sandboxes, sandbox_charges, sandbox_hosts, sandbox_settlement
from gateway.store.cloud_sandboxes import SandboxRow
from gateway.store.connection import Connection

NOT_FOUND = "Cloud sandbox not found"
SANDBOX_PREFIX = "acs"
TASK_PREFIX = "act"


def _create(conn: Connection, user_id: int, body: dict[str, Any], now: datetime) -> SandboxRow:
    wanted = required_fields(body)
    found = sandbox_hosts.get(conn, wanted.host_id)
    if found is None or not found[0].enabled or not host_online(found[1], now):
        raise ApiError(400, HOST_UNAVAILABLE, field="host_id")
    host = found[0]
    policy = parse_policy(host.security_policy)
    size = sandbox_size(body, available_range(policy, host.reported_capacity))
    check_image(policy, wanted.image)
    return cloud_sandboxes.create(
        conn, sandbox_id=random_id(SANDBOX_PREFIX), user_id=user_id, host_id=host.id,
        name=wanted.name, image=wanted.image, cpu_cores_nanos=size.cpu_cores_nanos,
        memory_mb=size.memory_mb, disk_gb=size.disk_gb, now=now)


def _charges(conn: Connection, user_id: int,
             sandbox_id: str) -> list[sandbox_charges.ChargeRow] | None:
    if cloud_sandboxes.get_owned(conn, user_id, sandbox_id) is None:
        return None
    return sandbox_charges.list_for_sandbox(conn, sandbox_id)


class CloudSandboxRoutes:
    """Mounted at ``/api/user/advanced-chat/cloud-sandboxes``."""

    app = make_app()

    def __init__(self, ctx: ConsoleContext) -> None:
        self.ctx = ctx

    @app.route("/", methods=["GET"])
    @json_route
    async def list_sandboxes(self, request: Any) -> list[dict[str, Any]]:
        user = await self.ctx.sessions.user(request)
        rows = await self.ctx.db.transaction(cloud_sandboxes.list_for_user, user["id"])
        return [sandbox_view(row) for row in rows]

    @app.route("/", methods=["POST"])
    @json_route
    async def create(self, request: Any) -> tuple[int, dict[str, Any]]:
        user = await self.ctx.sessions.user(request)
        body = read_object(request)
        row = await self.ctx.db.transaction(_create, user["id"], body, self.ctx.now())
        return 201, sandbox_view(row)

    @app.route("/<string:sandbox_id>", methods=["GET"])
    @json_route
    async def get(self, request: Any, sandbox_id: str) -> dict[str, Any]:
        user = await self.ctx.sessions.user(request)
        row = await self.ctx.db.transaction(
            cloud_sandboxes.get_ready_for_user, user["id"], sandbox_id)
        if row is None:
            raise ApiError(404, NOT_FOUND)
        return sandbox_view(row)

    @app.route("/<string:sandbox_id>", methods=["DELETE"])
    @json_route
    async def delete(self, request: Any, sandbox_id: str) -> dict[str, Any]:
        user = await self.ctx.sessions.user(request)
        deletion = await self.ctx.db.transaction(
            sandbox_settlement.delete_sandbox, user["id"], sandbox_id,
            random_id(TASK_PREFIX), self.ctx.now())
        if deletion is None:
            raise ApiError(404, NOT_FOUND)
        if deletion.settlement.taken_nanos:
            await self.ctx.invalidation.announce(USERS, str(user["id"]).encode())
        return {"ok": True}

    @app.route("/<string:sandbox_id>/charges", methods=["GET"])
    @json_route
    async def charges(self, request: Any, sandbox_id: str) -> list[dict[str, Any]]:
        user = await self.ctx.sessions.user(request)
        rows = await self.ctx.db.transaction(_charges, user["id"], sandbox_id)
        if rows is None:
            raise ApiError(404, NOT_FOUND)
        return [charge_view(row) for row in rows]
