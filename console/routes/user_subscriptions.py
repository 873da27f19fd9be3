"""The signed-in user's subscriptions and buying a plan from the wallet (console contract §4.13).

Mounted at ``/api/user/subscription``: ``GET /`` (active subscriptions with their ``plan``, due
resets applied) and ``POST /purchase`` ``{plan_id}``; and at ``/api/user/subscription-plans``:
``GET /`` (enabled, purchasable plans, cheapest first).  The purchase itself -- guarded wallet
debit, ledger row and grant or renewal in one transaction -- is
``gateway.store.plan_purchase.buy_with_wallet``; buying through a payment order is
``POST /api/user/payment/orders`` with ``subscription_plan_id``.  In ``personal`` system mode
every route here answers 403.
"""

from __future__ import annotations

from typing import Any

from twisted.web.iweb import IRequest

from console.context import ConsoleContext
from console.http import ApiError, json_route, make_app, read_object
from console.routes.subscription_plans import plan_view
from console.services.identity.sessions import SessionUser
from console.services.wallet.payments import personal_mode
from console.services.wallet.redeem import after_balance_change
from console.user_view import timestamp
from console.validation import Body
from gateway.billing.money import format_nanos
from gateway.store import plan_purchase

PERSONAL_MODE = "This feature is disabled in personal mode"


def subscription_view(row: dict[str, Any], plan: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": row["id"], "plan_id": row["plan_id"], "plan": plan_view(plan),
        "balance": format_nanos(row["balance_nanos"]),
        "active_until": timestamp(row["active_until"]),
        "next_reset_at": timestamp(row["next_reset_at"]),
        "last_reset_at": timestamp(row["last_reset_at"]),
        "source": row["source"], "created_at": timestamp(row["created_at"]),
        "updated_at": timestamp(row["updated_at"]),
    }


async def _member(ctx: ConsoleContext, request: IRequest) -> SessionUser:
    """The signed-in user, unless the deployment runs in personal mode (403)."""
    user = await ctx.sessions.user(request)
    if personal_mode(ctx.settings):
        raise ApiError(403, PERSONAL_MODE)
    return user


class UserSubscriptionRoutes:
    """Mounted at ``/api/user/subscription``."""

    app = make_app()

    def __init__(self, ctx: ConsoleContext) -> None:
        self.ctx = ctx

    @app.route("/", methods=["GET"])
    @json_route
    async def index(self, request: IRequest) -> list[dict[str, Any]]:
        user = await _member(self.ctx, request)
        rows = await self.ctx.db.transaction(
            plan_purchase.current_subscriptions, user["id"], self.ctx.now())
        return [subscription_view(row, row["plan"]) for row in rows]

    @app.route("/purchase", methods=["POST"])
    @json_route
    async def purchase(self, request: IRequest) -> dict[str, Any]:
        user = await _member(self.ctx, request)
        plan_id = Body(read_object(request)).integer("plan_id", required=True)
        try:
            result = await self.ctx.db.transaction(
                plan_purchase.buy_with_wallet, user["id"], plan_id, self.ctx.now())
        except plan_purchase.PurchaseRefused as refused:
            raise ApiError(refused.status, refused.message, field=refused.field) from None
        await after_balance_change(self.ctx, user["id"])
        return {"message": "Subscription purchased", "renewed": result["renewed"],
                "balance": format_nanos(result["balance_nanos"]),
                "subscription": subscription_view(result["subscription"], result["plan"])}


class PurchasablePlanRoutes:
    """Mounted at ``/api/user/subscription-plans``."""

    app = make_app()

    def __init__(self, ctx: ConsoleContext) -> None:
        self.ctx = ctx

    @app.route("/", methods=["GET"])
    @json_route
    async def index(self, request: IRequest) -> list[dict[str, Any]]:
        await _member(self.ctx, request)
        rows = await self.ctx.db.transaction(plan_purchase.purchasable_plans)
        return [plan_view(row) for row in rows]
