"""Redeeming a code for the signed-in user: brute-force limits, the transaction, the aftermath.

Guessing codes is throttled per user and per client IP (fixed one-minute windows in shared
state, so every node counts together); the redemption itself is one transaction in
``gateway.store.redeem_codes``.  After any balance-changing console action the gateway's cached
wallet of the user is dropped and ``USERS`` is announced (``after_balance_change``), so other
caches reload and the new balance is spendable at once.
"""

from __future__ import annotations

from typing import Any

from twisted.web.iweb import IRequest

from console.context import ConsoleContext
from console.http import ApiError, bad_request
from console.services.identity.sessions import SessionUser
from console.services.identity.throttle import Limit
from gateway.invalidation import USERS
from gateway.store import redeem_codes as store

#: attempts per minute per client IP, and per user (each counted whether it succeeds or not)
REDEEM = Limit("redeem", 30)
PER_USER = 10
WINDOW_SECONDS = 60


async def after_balance_change(ctx: ConsoleContext, user_id: int) -> None:
    wallets = getattr(ctx, "wallets", None)
    if wallets is not None:
        wallets.forget_user(user_id)
    await ctx.invalidation.announce(USERS, str(user_id).encode())


async def throttle(ctx: ConsoleContext, request: IRequest, user_id: int) -> None:
    await ctx.throttle.check(request, REDEEM)
    verdict = await ctx.state.hit(f"throttle:redeem:user:{user_id}", PER_USER, WINDOW_SECONDS)
    if not verdict.allowed:
        raise ApiError(429, "Too many requests. Please try again later.",
                       extra={"retry_after": verdict.retry_after},
                       headers={"Retry-After": str(verdict.retry_after)})


async def redeem(ctx: ConsoleContext, request: IRequest, user: SessionUser,
                 raw_code: Any) -> dict[str, Any]:
    """Redeem ``raw_code`` for ``user``: the store's result, or a 400/429 ``ApiError``."""
    if raw_code is not None and not isinstance(raw_code, str):
        raise bad_request("code must be a string", field="code")
    code = store.normalise(raw_code or "")
    if not code:
        raise ApiError(400, "Redeem code is required", field="code")
    await throttle(ctx, request, user["id"])
    if len(code) > 64:
        raise ApiError(400, "Redeem code not found", type="redeem_refused")
    try:
        result = await ctx.db.transaction(store.redeem, user["id"], code, ctx.now())
    except store.RedeemRefused as refused:
        raise ApiError(400, refused.message, type="redeem_refused") from None
    await after_balance_change(ctx, user["id"])
    return result
