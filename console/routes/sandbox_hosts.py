"""Sandbox hosts (agents contract §3.1 to §3.3, [P-24], [P-25]): the admin routes at
``/api/advanced-chat/sandbox-hosts`` (the users' ``…/sandbox-hosts/available`` is
``console.routes.available_sandbox_hosts``; both answer with ``host_view``).

Creating a host creates its hidden ``sandboxd`` device (owned by the admin, [P-16]) in the same
transaction and returns the plaintext token once with the command that starts the host program.
Rotating the token or disabling the host closes the host's live socket with 4401.
"""

from __future__ import annotations

from typing import Any

from console.context import ConsoleContext
from console.http import ApiError, bad_request, json_route, make_app, read_object
from console.services.identity.sessions import SessionUser
from console.services.sandboxes.host_view import PRICE_FIELDS, host_view
from gateway.billing.money import AmountError, parse_decimal, to_nanos
from gateway.links import ids
from gateway.links.hub import CLOSE_REVOKED
from gateway.sandboxes.host_policy import PolicyError, policy_text
from gateway.store import devices as device_store
from gateway.store import sandbox_hosts as host_store

NOT_FOUND = "Sandbox host not found"
ADMIN_REQUIRED = "Admin permission required"
NEGATIVE = "Prices must not be negative"
DATA_DIR = "/var/lib/lockgate-sandboxd"


def _price(body: dict[str, Any], name: str) -> int | None:
    if name not in body or body[name] is None:
        return None
    try:
        amount = parse_decimal(body[name], allow_negative=True)
    except AmountError as exc:
        raise bad_request(f"{name} {exc}", field=name) from None
    if amount < 0:
        raise bad_request(NEGATIVE, field=name)
    return to_nanos(amount)


def host_changes(body: dict[str, Any], *, creating: bool) -> dict[str, Any]:
    """The columns ``body`` sets (validated as a whole before anything is written)."""
    changes: dict[str, Any] = {}
    name = body.get("name")
    if name is not None and not isinstance(name, str):
        raise bad_request("name must be a string", field="name")
    name = (name or "").strip()[:120]
    if name:
        changes["name"] = name
    elif creating:
        raise bad_request("Host name is required", field="name")
    if "security_policy" in body or creating:
        try:
            changes["security_policy"] = policy_text(body.get("security_policy"))
        except PolicyError as exc:
            raise bad_request(str(exc), field="security_policy") from None
    for field, column in PRICE_FIELDS.items():
        nanos = _price(body, field)
        if nanos is not None:
            changes[column] = nanos
    multiplier = body.get("runtime_multiplier")
    if multiplier is not None:
        try:
            value = parse_decimal(multiplier, allow_negative=True)
        except AmountError as exc:
            raise bad_request(f"runtime_multiplier {exc}", field="runtime_multiplier") from None
        if value > 0:
            changes["runtime_multiplier_nanos"] = to_nanos(value)
    if "enabled" in body:
        if not isinstance(body["enabled"], bool):
            raise bad_request("enabled must be a boolean", field="enabled")
        changes["enabled"] = body["enabled"]
    return changes


def start_command(request: Any, base_url: str, token: str) -> str:
    server = base_url.strip().rstrip("/")
    if not server:
        scheme = "https" if request.isSecure() else "http"
        host = (request.getHeader(b"host") or b"localhost").decode("ascii", "replace")
        server = f"{scheme}://{host}"
    return (f"lockgate-connector -server {server} -token {token} -mode sandboxd "
            f"-data-dir {DATA_DIR}")


class SandboxHostRoutes:
    """Mounted at ``/api/advanced-chat/sandbox-hosts`` (admin)."""

    app = make_app()

    def __init__(self, ctx: ConsoleContext) -> None:
        self.ctx = ctx

    async def _admin(self, request: Any) -> SessionUser:
        user = await self.ctx.sessions.user(request)
        if not user["is_admin"]:
            raise ApiError(403, ADMIN_REQUIRED)
        return user

    async def _view(self, host_id: str) -> dict[str, Any]:
        found = await self.ctx.db.transaction(host_store.get, host_id)
        if found is None:
            raise ApiError(404, NOT_FOUND)
        return host_view(*found, self.ctx.now(), admin=True)

    @app.route("/", methods=["GET"])
    @json_route
    async def index(self, request: Any) -> list[dict[str, Any]]:
        await self._admin(request)
        now = self.ctx.now()
        return [host_view(host, device, now, admin=True)
                for host, device in await self.ctx.db.transaction(host_store.list_all)]

    @app.route("/", methods=["POST"])
    @json_route
    async def create(self, request: Any) -> tuple[int, dict[str, Any]]:
        admin = await self._admin(request)
        changes = host_changes(read_object(request), creating=True)
        token = ids.new_token()
        host_id, device_id, now = ids.new_id(ids.HOST), ids.new_id(ids.DEVICE), self.ctx.now()
        prices = {column: changes[column] for column in
                  (*PRICE_FIELDS.values(), "runtime_multiplier_nanos") if column in changes}

        def create(conn: Any) -> None:
            device_store.create(conn, device_id=device_id, user_id=admin["id"],
                                name=changes["name"], remark="", mode=device_store.SANDBOXD,
                                listen_port=0, token_hash=ids.token_hash(token), hidden=True,
                                now=now)
            host_store.create(conn, host_id=host_id, device_id=device_id,
                              name=changes["name"], created_by=admin["id"],
                              enabled=changes.get("enabled", True),
                              security_policy=changes["security_policy"], prices=prices,
                              now=now)

        await self.ctx.db.transaction(create)
        return 201, {"host": await self._view(host_id), "token": token,
                     "command": start_command(request, self.ctx.settings.text("base_url"),
                                              token)}

    @app.route("/<host_id>", methods=["PUT"])
    @json_route
    async def update(self, request: Any, host_id: str) -> dict[str, Any]:
        await self._admin(request)
        changes = host_changes(read_object(request), creating=False)
        found = await self.ctx.db.transaction(host_store.get, host_id)
        if found is None:
            raise ApiError(404, NOT_FOUND)
        host, device = found
        if changes:
            await self.ctx.db.transaction(host_store.update_fields, host.id, changes,
                                          self.ctx.now())
        if changes.get("enabled") is False:
            self.ctx.agent_links.hub.close_device(device.id, CLOSE_REVOKED, "host disabled")
        elif changes.get("enabled") is True and not host.enabled:
            self.ctx.agent_links.hub.wake(device.id)
        return await self._view(host.id)

    @app.route("/<host_id>/token", methods=["POST"])
    @json_route
    async def rotate(self, request: Any, host_id: str) -> dict[str, Any]:
        await self._admin(request)
        found = await self.ctx.db.transaction(host_store.get, host_id)
        if found is None:
            raise ApiError(404, NOT_FOUND)
        token = ids.new_token()
        await self.ctx.db.transaction(device_store.set_token, found[1].id,
                                      ids.token_hash(token), self.ctx.now())
        self.ctx.agent_links.hub.close_device(found[1].id, CLOSE_REVOKED, "token revoked")
        return {"host": await self._view(host_id), "token": token,
                "command": start_command(request, self.ctx.settings.text("base_url"), token)}
