"""The caller's top-up orders and the payment config (console contract §4.7).

Mounted at ``/api/user/payment``: ``GET /config``, ``GET /orders`` (dual-mode list, §1.4),
``POST /orders`` and ``GET /orders/<order_no>``.  Every order query is scoped to the signed-in
user, so another user's order number answers exactly like a missing one (404).
"""

from __future__ import annotations

from typing import Any

from twisted.web.iweb import IRequest

from console.context import ConsoleContext
from console.http import ApiError, json_route, make_app, read_object
from console.services.log_query import parse_time, query_value
from console.services.wallet.payments import (
    PREMIUM_REQUIRED,
    PaymentService,
    config_view,
    order_view,
    personal_mode,
)
from console.validation import page_value
from gateway.store import orders

NOT_FOUND = "Payment order not found"
DEFAULT_PAGE_SIZE = 20
MAX_PAGE_SIZE = 100
PLAIN_LIMIT = 100
ENVELOPE_PARAMS = ("page", "page_size", "from", "to", "start_time", "end_time", "start_date",
                   "end_date")




def site_base(request: IRequest) -> str:
    """``scheme://host`` the client used (when the ``base_url`` setting is blank)."""
    host = (request.getHeader(b"host") or b"localhost").decode("ascii", "replace")
    return ("https://" if request.isSecure() else "http://") + host


class PaymentRoutes:
    """Mounted at ``/api/user/payment``."""

    app = make_app()

    def __init__(self, ctx: ConsoleContext) -> None:
        self.ctx = ctx
        self.service = PaymentService(ctx)

    @app.route("/config", methods=["GET"])
    @json_route
    async def config(self, request: IRequest) -> dict[str, Any]:
        await self.ctx.sessions.user(request)
        return config_view(self.ctx.settings)

    @app.route("/orders", methods=["POST"])
    @json_route
    async def create(self, request: IRequest) -> dict[str, Any]:
        user = await self.ctx.sessions.user(request)
        return await self.service.create_order(user, read_object(request), site_base(request))

    @app.route("/orders", methods=["GET"])
    @json_route
    async def list_orders(self, request: IRequest) -> Any:
        user = await self.ctx.sessions.user(request)
        if personal_mode(self.ctx.settings):
            raise ApiError(403, PREMIUM_REQUIRED)
        start_text = query_value(request, "from", "start_time", "start_date")
        end_text = query_value(request, "to", "end_time", "end_date")
        start = parse_time(start_text, end=False) if start_text else None
        end = parse_time(end_text, end=True) if end_text else None
        if not any(query_value(request, name) is not None for name in ENVELOPE_PARAMS):
            rows, _total = await self.ctx.db.transaction(
                orders.list_for_user, user["id"], limit=PLAIN_LIMIT)
            return [order_view(row, with_url=False) for row in rows]
        page = page_value(query_value(request, "page"), 1, "page")
        size = min(page_value(query_value(request, "page_size"), DEFAULT_PAGE_SIZE, "page_size"),
                   MAX_PAGE_SIZE)
        rows, total = await self.ctx.db.transaction(
            orders.list_for_user, user["id"], limit=size, offset=(page - 1) * size,
            start=start, end=end)
        return {"items": [order_view(row, with_url=False) for row in rows], "total": total,
                "page": page, "page_size": size}

    @app.route("/orders/<string:order_no>", methods=["GET"])
    @json_route
    async def detail(self, request: IRequest, order_no: str) -> dict[str, Any]:
        user = await self.ctx.sessions.user(request)
        row = await self.ctx.db.transaction(orders.get_for_user, user["id"], order_no[:64])
        if row is None:
            raise ApiError(404, NOT_FOUND)
        view = order_view(row, with_url=row["status"] == orders.PENDING)
        return view
