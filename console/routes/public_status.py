"""``GET /api/public/status``: the public status page data (console contract §3.3).

404 unless the ``status_monitor_enabled`` setting is on.  Only enabled monitors, by name; each
with its last status (``pending`` before the first check), up to 60 newest checks (oldest
first, without ids, codes or messages -- those stay admin-only) and ``uptime``, the percentage
of ``up`` among those checks rounded to two decimals (0 when there are none).
"""

from __future__ import annotations

from typing import Any

from console.context import ConsoleContext
from console.http import json_route, make_app, not_found
from console.user_view import timestamp
from gateway.store import monitors as store

PUBLIC_CHECKS = 60


def uptime(checks: list[dict[str, Any]]) -> float:
    if not checks:
        return 0
    up = sum(1 for check in checks if check["status"] == "up")
    return round(up * 100 / len(checks), 2)


def public_monitor(monitor: dict[str, Any]) -> dict[str, Any]:
    checks = monitor["recent_checks"]
    return {
        "id": monitor["id"],
        "name": monitor["name"],
        "status": monitor["last_status"] or "pending",
        "latency_ms": monitor["last_latency_ms"],
        "last_checked_at": timestamp(monitor["last_checked_at"]),
        "uptime": uptime(checks),
        "recent_checks": [{"status": c["status"], "latency_ms": c["latency_ms"],
                           "checked_at": timestamp(c["checked_at"])} for c in checks],
    }


class PublicStatusRoutes:
    app = make_app()

    def __init__(self, ctx: ConsoleContext) -> None:
        self.ctx = ctx

    @app.route("/", methods=["GET"])
    @json_route
    async def status(self, request: Any) -> dict[str, Any]:
        if not self.ctx.settings.flag("status_monitor_enabled"):
            raise not_found()
        rows = await self.ctx.db.transaction(store.list_monitors, enabled_only=True,
                                             checks=PUBLIC_CHECKS)
        return {"enabled": True, "generated_at": timestamp(self.ctx.now()),
                "monitors": [public_monitor(row) for row in rows]}
