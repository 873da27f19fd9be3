"""``/api/redeem-codes`` (admin): redeem code CRUD and batch creation (console contract §6.2).

Inputs are whitelisted.  ``max_uses`` absent -> 1, ``0`` -> unlimited, negative -> 400 (contract
§0 and weakness 17).  A blank ``code`` is generated (20 base32 characters).  Batch creation:
``POST`` with ``count`` (1..1000) and an optional ``prefix`` creates that many codes sharing the
other fields; the answer is ``{"items": [...], "codes": ["..."]}``.  ``PUT`` writes every field
(absent ones take their defaults) and changes ``code`` only when a non-blank one is given.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

from console.context import ConsoleContext
from console.http import bad_request, json_route, make_app, read_object
from console.services.catalog import tx as catalog_tx
from console.user_view import timestamp
from console.validation import MISSING, Body
from gateway.billing.money import format_nanos, to_nanos
from gateway.store import redeem_codes as store

CODE_MAX = 64
MAX_BATCH = 1000
_FORMATS = ("%Y-%m-%dT%H:%M", "%Y-%m-%d %H:%M:%S", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%d")
_PREFIX = re.compile(r"^[A-Z0-9]*$")


def parse_expiry(value: Any) -> datetime | None:
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise bad_request("Invalid expiration time", field="expires_at")
    text = value.strip()
    if not text:
        return None
    for fmt in _FORMATS:
        try:
            return datetime.strptime(text, fmt).replace(tzinfo=UTC)
        except ValueError:
            pass
    try:
        parsed = datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise bad_request("Invalid expiration time", field="expires_at") from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.astimezone(UTC)


def code_values(body: Body) -> dict[str, Any]:
    """Every stored field but ``code`` (full-replace semantics on update)."""
    amount = body.decimal("amount", allow_negative=True)
    if amount is not MISSING and amount < 0:
        raise bad_request("Amount must not be negative", field="amount")
    amount_nanos = to_nanos(amount) if amount is not MISSING else 0
    group_id = body.integer("group_id", minimum=1)
    plan_id = body.integer("subscription_plan_id", minimum=1)
    if not amount_nanos and group_id is MISSING and plan_id is MISSING:
        raise bad_request("Amount, group, or subscription plan is required", field="amount")
    group_days = body.integer("group_duration_days")
    if group_days is not MISSING and group_days < 0:
        raise bad_request("Group duration must not be negative", field="group_duration_days")
    plan_days = body.integer("subscription_duration_days")
    if plan_days is not MISSING and plan_days < 0:
        raise bad_request("Subscription duration must not be negative",
                          field="subscription_duration_days")
    max_uses = body.integer("max_uses")
    if max_uses is not MISSING and max_uses < 0:
        raise bad_request("max_uses must not be negative (0 = unlimited)", field="max_uses")
    stacking = body.boolean("allow_stacking")
    enabled = body.boolean("enabled")
    return {
        "amount_nanos": amount_nanos,
        "group_id": None if group_id is MISSING else group_id,
        "group_duration_days": 0 if group_days is MISSING else group_days,
        "subscription_plan_id": None if plan_id is MISSING else plan_id,
        # None: the plan's own duration (resolved in the store)
        "subscription_duration_days": None if plan_days is MISSING else plan_days,
        "allow_stacking": False if stacking is MISSING else stacking,
        "max_uses": 1 if max_uses is MISSING else max_uses,
        "enabled": True if enabled is MISSING else enabled,
        "expires_at": parse_expiry(body.data.get("expires_at")),
    }


def code_view(row: dict[str, Any]) -> dict[str, Any]:
    group, plan = row.get("group"), row.get("subscription_plan")
    return {
        "id": row["id"], "code": row["code"], "amount": format_nanos(row["amount_nanos"]),
        "group_id": row["group_id"],
        "group": ({"id": group["id"], "name": group["name"],
                   "multiplier": format_nanos(group["multiplier_nanos"])} if group else None),
        "group_duration_days": row["group_duration_days"],
        "subscription_plan_id": row["subscription_plan_id"],
        "subscription_plan": ({"id": plan["id"], "name": plan["name"]} if plan else None),
        "subscription_duration_days": row["subscription_duration_days"],
        "allow_stacking": bool(row["allow_stacking"]), "max_uses": row["max_uses"],
        "used_count": row["used_count"], "enabled": bool(row["enabled"]),
        "expires_at": timestamp(row["expires_at"]),
        "created_at": timestamp(row["created_at"]), "updated_at": timestamp(row["updated_at"]),
    }


def _given_code(body: Body) -> str:
    raw = body.string("code", max_length=200)
    code = store.normalise(raw) if raw is not MISSING else ""
    if len(code) > CODE_MAX:
        raise bad_request(f"code must be at most {CODE_MAX} characters", field="code")
    return code


def _batch(body: Body) -> list[str]:
    count = body.integer("count", minimum=1, maximum=MAX_BATCH)
    if count is MISSING:
        code = _given_code(body)
        return [code or store.generate()]
    prefix_raw = body.string("prefix", max_length=32)
    prefix = store.normalise(prefix_raw) if prefix_raw is not MISSING else ""
    if not _PREFIX.match(prefix):
        raise bad_request("prefix may hold letters and digits only", field="prefix")
    if body.has("code") and body.data["code"]:
        raise bad_request("code cannot be combined with count", field="code")
    codes: set[str] = set()
    while len(codes) < count:
        codes.add(prefix + store.generate(16))
    return sorted(codes)


class RedeemCodeRoutes:
    app = make_app()

    def __init__(self, ctx: ConsoleContext) -> None:
        self.ctx = ctx

    @app.route("/", methods=["GET"])
    @json_route
    async def index(self, request: Any) -> list[dict[str, Any]]:
        await self.ctx.sessions.admin(request)
        return [code_view(r) for r in await self.ctx.db.transaction(store.list_codes)]

    @app.route("/", methods=["POST"])
    @json_route
    async def create(self, request: Any) -> Any:
        await self.ctx.sessions.admin(request)
        body = Body(read_object(request))
        codes = _batch(body)
        values = code_values(body)
        rows = await catalog_tx.run(self.ctx, store.create_codes, values, codes, self.ctx.now())
        if body.has("count"):
            return {"items": [code_view(r) for r in rows], "codes": [r["code"] for r in rows]}
        return code_view(rows[0])

    @app.route("/<int:item_id>", methods=["GET"])
    @json_route
    async def show(self, request: Any, item_id: int) -> dict[str, Any]:
        await self.ctx.sessions.admin(request)
        return code_view(await catalog_tx.run(self.ctx, store.get_code, item_id))

    @app.route("/<int:item_id>", methods=["PUT"])
    @json_route
    async def update(self, request: Any, item_id: int) -> dict[str, Any]:
        await self.ctx.sessions.admin(request)
        body = Body(read_object(request))
        values = {**code_values(body), "code": _given_code(body)}
        return code_view(await catalog_tx.run(self.ctx, store.update_code, item_id, values,
                                              self.ctx.now()))

    @app.route("/<int:item_id>", methods=["DELETE"])
    @json_route
    async def delete(self, request: Any, item_id: int) -> dict[str, Any]:
        await self.ctx.sessions.admin(request)
        await catalog_tx.run(self.ctx, store.delete_code, item_id)
        return {"message": "Redeem code deleted"}

