"""``GET /v1/models``, ``GET /v1/balance`` and ``GET /v1/user/balance`` (contract §11).

Not billed.  Models come from the in-memory catalog; balances are read from the database (one
small query) so they show committed money, not this node's reservations.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import orjson

from gateway import errors
from gateway.auth import Caller, authenticate
from gateway.billing.money import format_decimal, from_nanos
from gateway.catalog.meta_listing import shown
from gateway.context import GatewayContext
from gateway.limits import global_identity
from gateway.store.balances import key_quota, wallet_totals

CREDITS_PER_UNIT = Decimal(10)


async def _caller(ctx: GatewayContext, request: Any) -> Caller:
    if not ctx.settings.flag("token_api_enabled"):
        raise errors.gateway_disabled()
    caller = await authenticate(ctx, request)
    verdict = await ctx.limiter.check_global(
        global_identity(caller.key_id, caller.user.id, caller.ip))
    if verdict.error is not None:
        raise verdict.error
    return caller


def _credits(amount: Decimal) -> str:
    return format_decimal(amount * CREDITS_PER_UNIT)


async def models(ctx: GatewayContext, request: Any) -> bytes:
    caller = await _caller(ctx, request)
    snapshot = ctx.catalog.snapshot
    key_channels = caller.key.allowed_user_channels if caller.key else ()
    names = shown(snapshot, snapshot.models_for(
        caller.user.id, caller.user.active_group_ids(ctx.now()), key_channels))
    names += list(snapshot.meta_models)
    if caller.key is not None:
        names = [name for name in names if caller.key.allows_model(name)]
    return orjson.dumps({"object": "list", "data": [
        {"id": name, "object": "model", "created": 0, "owned_by": ctx.owned_by}
        for name in sorted(set(names))]})


async def key_balance(ctx: GatewayContext, request: Any) -> bytes:
    caller = await _caller(ctx, request)
    if caller.key is None:
        balance, _used = await ctx.db.transaction(wallet_totals, caller.user.id)
        remain = from_nanos(balance)
        return orjson.dumps({"success": True, "remain_balance": format_decimal(remain),
                             "remain_credits": _credits(remain), "used_balance": "0",
                             "used_credits": 0, "unlimited_quota": True})
    quota, spent = await ctx.db.transaction(key_quota, caller.key.id)
    used = from_nanos(spent)
    if quota <= 0:
        return orjson.dumps({"success": True, "remain_balance": "-1", "remain_credits": -1,
                             "used_balance": format_decimal(used),
                             "used_credits": _credits(used), "unlimited_quota": True})
    remain = from_nanos(max(quota - spent, 0))
    return orjson.dumps({"success": True, "remain_balance": format_decimal(remain),
                         "remain_credits": _credits(remain),
                         "used_balance": format_decimal(used), "used_credits": _credits(used),
                         "unlimited_quota": False})


async def user_balance(ctx: GatewayContext, request: Any) -> bytes:
    caller = await _caller(ctx, request)
    balance, used_nanos = await ctx.db.transaction(wallet_totals, caller.user.id)
    remain, used = from_nanos(balance), from_nanos(used_nanos)
    return orjson.dumps({"success": True, "remain_balance": format_decimal(remain),
                         "remain_credits": _credits(remain), "used_balance": format_decimal(used),
                         "used_credits": _credits(used)})
