"""``/api/status-monitors`` (admin): status monitor CRUD and check-now (console contract §5.14).

Inputs accept the origin names (``check_type``, ``target_url``) and the spec aliases (``type``,
``target``, D7); views emit both.  Targets must pass the URL policy when saved (and again at
check time, since the policy can change).  Update replaces every editable field, keeping
``enabled`` when absent.  ``POST /:id/check`` runs at once, even for a disabled monitor or with
the status page off.
"""

from __future__ import annotations

from typing import Any

from console.context import ConsoleContext
from console.http import ApiError, bad_request, json_route, make_app, read_object
from console.services.catalog import tx as catalog_tx
from console.user_view import timestamp
from console.validation import MISSING, Body, id_value
from gateway.channels.net_policy import UrlPolicy
from gateway.jobs.monitors import HTTP, TCP, MonitorRunner, TargetError, check_target
from gateway.store import monitors as store

RECENT_CHECKS = 30


def _clamped(body: Body, name: str, default: int, low: int, high: int) -> int:
    value = body.integer(name)
    if value is MISSING or value == 0:
        return default
    return min(max(value, low), high)


def monitor_values(body: Body, settings: Any, *, creating: bool) -> dict[str, Any]:
    name = body.string("name", max_length=100)
    if not name:
        raise bad_request("Name is required", field="name")
    type_field = body.first_present("check_type", "type") or "check_type"
    check_type = body.string(type_field, max_length=8)
    check_type = HTTP if not check_type else check_type.lower()
    if check_type not in (HTTP, TCP):
        raise bad_request("check_type must be http or tcp", field=type_field)
    target_field = body.first_present("target_url", "target") or "target_url"
    target = body.string(target_field, max_length=2048)
    if not target:
        raise bad_request("Target URL is required", field=target_field)
    try:
        target = check_target(check_type, target, UrlPolicy.from_settings(settings))
    except TargetError:
        raise bad_request("Unsafe or invalid target URL", field=target_field) from None
    method = body.string("method", max_length=16)
    values: dict[str, Any] = {
        "name": name,
        "target_url": target,
        "check_type": check_type,
        "method": "HEAD" if isinstance(method, str) and method.upper() == "HEAD" else "GET",
        "interval_seconds": _clamped(body, "interval_seconds", 60, 10, 86400),
        "retention_hours": _clamped(body, "retention_hours", 168, 1, 8760),
    }
    enabled = body.boolean("enabled")
    if enabled is not MISSING:
        values["enabled"] = enabled
    elif creating:
        values["enabled"] = True
    return values


def check_view(check: dict[str, Any]) -> dict[str, Any]:
    view: dict[str, Any] = {"id": check["id"], "status": check["status"],
                            "latency_ms": check["latency_ms"]}
    if check["status_code"]:
        view["status_code"] = check["status_code"]
    if check["message"]:
        view["message"] = check["message"]
    view["checked_at"] = timestamp(check["checked_at"])
    return view


def monitor_view(monitor: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": monitor["id"],
        "name": monitor["name"],
        "target_url": monitor["target_url"],
        "target": monitor["target_url"],
        "check_type": monitor["check_type"],
        "type": monitor["check_type"],
        "method": monitor["method"],
        "interval_seconds": monitor["interval_seconds"],
        "retention_hours": monitor["retention_hours"],
        "enabled": bool(monitor["enabled"]),
        "last_status": monitor["last_status"],
        "last_latency_ms": monitor["last_latency_ms"],
        "last_status_code": monitor["last_status_code"],
        "last_message": monitor["last_message"],
        "last_checked_at": timestamp(monitor["last_checked_at"]),
        "recent_checks": [check_view(c) for c in monitor.get("recent_checks", [])],
        "created_at": timestamp(monitor["created_at"]),
        "updated_at": timestamp(monitor["updated_at"]),
    }


def monitor_id(raw: str) -> int:
    return id_value(raw, "id", "Invalid status monitor id")


class StatusMonitorRoutes:
    app = make_app()

    def __init__(self, ctx: ConsoleContext) -> None:
        self.ctx = ctx
        self.runner = MonitorRunner(ctx.reactor, ctx.clock, ctx.db, lambda: ctx.settings)

    async def _view(self, item_id: int) -> dict[str, Any]:
        return monitor_view(await catalog_tx.run(self.ctx, store.with_checks, item_id,
                                                 RECENT_CHECKS))

    @app.route("/", methods=["GET"])
    @json_route
    async def index(self, request: Any) -> list[dict[str, Any]]:
        await self.ctx.sessions.admin(request)
        rows = await self.ctx.db.transaction(store.list_monitors)
        return [monitor_view(row) for row in rows]

    @app.route("/", methods=["POST"])
    @json_route
    async def create(self, request: Any) -> dict[str, Any]:
        await self.ctx.sessions.admin(request)
        values = monitor_values(Body(read_object(request)), self.ctx.settings, creating=True)
        item_id = await self.ctx.db.transaction(store.create_monitor, values, self.ctx.now())
        return await self._view(item_id)

    @app.route("/<item>", methods=["GET"])
    @json_route
    async def show(self, request: Any, item: str) -> dict[str, Any]:
        await self.ctx.sessions.admin(request)
        return await self._view(monitor_id(item))

    @app.route("/<item>", methods=["PUT"])
    @json_route
    async def update(self, request: Any, item: str) -> dict[str, Any]:
        await self.ctx.sessions.admin(request)
        item_id = monitor_id(item)
        values = monitor_values(Body(read_object(request)), self.ctx.settings, creating=False)
        await catalog_tx.run(self.ctx, store.update_monitor, item_id, values, self.ctx.now())
        return await self._view(item_id)

    @app.route("/<item>", methods=["DELETE"])
    @json_route
    async def delete(self, request: Any, item: str) -> dict[str, Any]:
        await self.ctx.sessions.admin(request)
        await catalog_tx.run(self.ctx, store.delete_monitor, monitor_id(item))
        return {"message": "Status monitor deleted"}

    @app.route("/<item>/check", methods=["POST"])
    @json_route
    async def check(self, request: Any, item: str) -> dict[str, Any]:
        await self.ctx.sessions.admin(request)
        item_id = monitor_id(item)
        monitor = await catalog_tx.run(self.ctx, store.get_monitor, item_id)
        stored = await self.runner.check(monitor)
        if stored is None:
            raise ApiError(404, store.NOT_FOUND)
        return {"id": stored["id"], "monitor_id": item_id, "status": stored["status"],
                "latency_ms": stored["latency_ms"], "status_code": stored["status_code"],
                "message": stored["message"], "checked_at": timestamp(stored["checked_at"])}
