"""``POST /api/user/redeem-code``: redeem a code for the signed-in user (console contract §4.12).

The answer is the origin's ``{amount, balance}`` plus the code's fields (D10).  Refusals are 400
with the contract's messages; guessing is throttled (429).
"""

from __future__ import annotations

from typing import Any

from console.context import ConsoleContext
from console.http import json_route, make_app, read_object
from console.routes.redeem_codes import code_view
from console.services.wallet.redeem import redeem
from gateway.billing.money import format_nanos


class RedeemRoutes:
    app = make_app()

    def __init__(self, ctx: ConsoleContext) -> None:
        self.ctx = ctx

    @app.route("/", methods=["POST"])
    @json_route
    async def redeem(self, request: Any) -> dict[str, Any]:
        user = await self.ctx.sessions.user(request)
        body = read_object(request)
        result = await redeem(self.ctx, request, user, body.get("code"))
        view = code_view(result["code"])
        for name in ("group", "subscription_plan", "created_at", "updated_at", "enabled"):
            view.pop(name, None)
        return {**view, "amount": format_nanos(result["amount_nanos"]),
                "balance": format_nanos(result["balance_nanos"])}
