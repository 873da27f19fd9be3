"""``/api/subscription-plans`` (admin): subscription plan CRUD (console contract §6.1, D8).

Inputs: ``name``, ``description``, ``reset_amount`` (or ``amount`` when ``reset_amount`` is
absent), ``reset_interval_days``, ``price``, ``duration_days`` (or ``active_days``),
``purchasable``, ``enabled``.  Update is a full replace except ``enabled``, which keeps its value
when absent.  A plan used by any subscription or redeem code cannot be deleted.
"""

from __future__ import annotations

from typing import Any

from console.context import ConsoleContext
from console.http import bad_request, json_route, make_app, read_object
from console.services.catalog import tx as catalog_tx
from console.user_view import timestamp
from console.validation import MISSING, Body
from gateway.billing.money import format_nanos, to_nanos
from gateway.store import subscriptions as store

NAME_MAX = 100


def plan_values(body: Body, *, creating: bool) -> dict[str, Any]:
    name = body.string("name", max_length=NAME_MAX)
    if not name:
        raise bad_request("Plan name is required", field="name")
    description = body.string("description", max_length=2000)
    amount_field = "reset_amount" if body.has("reset_amount") else "amount"
    amount = body.decimal(amount_field, allow_negative=True)
    if amount is MISSING or amount <= 0:
        raise bad_request("Reset amount must be greater than zero", field=amount_field)
    interval = body.integer("reset_interval_days")
    if interval is MISSING or interval <= 0:
        raise bad_request("Reset interval must be greater than zero",
                          field="reset_interval_days")
    price = body.decimal("price", allow_negative=True)
    if price is not MISSING and price < 0:
        raise bad_request("Price must not be negative", field="price")
    days_field = "duration_days" if body.has("duration_days") else "active_days"
    days = body.integer(days_field)
    if days is not MISSING and days < 0:
        raise bad_request("Duration must not be negative", field=days_field)
    purchasable = body.boolean("purchasable")
    price_nanos = to_nanos(price) if price is not MISSING else 0
    if purchasable is True and price_nanos <= 0:
        raise bad_request("Purchasable plans require a price greater than zero",
                          field="purchasable")
    enabled = body.boolean("enabled")
    values: dict[str, Any] = {
        "name": name, "description": "" if description is MISSING else description,
        "reset_amount_nanos": to_nanos(amount), "reset_interval_days": interval,
        "price_nanos": price_nanos, "duration_days": 0 if days is MISSING else days,
        "purchasable": purchasable is True,
    }
    if enabled is not MISSING:
        values["enabled"] = enabled
    elif creating:
        values["enabled"] = True
    return values


def plan_view(row: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": row["id"], "name": row["name"], "description": row["description"],
        "reset_amount": format_nanos(row["reset_amount_nanos"]),
        "amount": format_nanos(row["reset_amount_nanos"]),
        "reset_interval_days": row["reset_interval_days"], "price": format_nanos(
            row["price_nanos"]),
        "duration_days": row["duration_days"], "active_days": row["duration_days"],
        "purchasable": bool(row["purchasable"]), "enabled": bool(row["enabled"]),
        "created_at": timestamp(row["created_at"]), "updated_at": timestamp(row["updated_at"]),
    }


class SubscriptionPlanRoutes:
    app = make_app()

    def __init__(self, ctx: ConsoleContext) -> None:
        self.ctx = ctx

    @app.route("/", methods=["GET"])
    @json_route
    async def index(self, request: Any) -> list[dict[str, Any]]:
        await self.ctx.sessions.admin(request)
        return [plan_view(r) for r in await self.ctx.db.transaction(store.list_plans)]

    @app.route("/", methods=["POST"])
    @json_route
    async def create(self, request: Any) -> dict[str, Any]:
        await self.ctx.sessions.admin(request)
        values = plan_values(Body(read_object(request)), creating=True)
        return plan_view(await catalog_tx.run(self.ctx, store.create_plan, values,
                                              self.ctx.now()))

    @app.route("/<int:item_id>", methods=["GET"])
    @json_route
    async def show(self, request: Any, item_id: int) -> dict[str, Any]:
        await self.ctx.sessions.admin(request)
        return plan_view(await catalog_tx.run(self.ctx, store.get_plan, item_id))

    @app.route("/<int:item_id>", methods=["PUT"])
    @json_route
    async def update(self, request: Any, item_id: int) -> dict[str, Any]:
        await self.ctx.sessions.admin(request)
        values = plan_values(Body(read_object(request)), creating=False)
        return plan_view(await catalog_tx.run(self.ctx, store.update_plan, item_id, values,
                                              self.ctx.now()))

    @app.route("/<int:item_id>", methods=["DELETE"])
    @json_route
    async def delete(self, request: Any, item_id: int) -> dict[str, Any]:
        await self.ctx.sessions.admin(request)
        await catalog_tx.run(self.ctx, store.delete_plan, item_id)
        return {"message": "Subscription plan deleted"}
