"""Runs one assistant store call in a transaction and maps its refusals to console errors.

A ``Refused`` rolls the transaction back and answers the contract's status and message; a
unique index tripped by a concurrent twin (names, ids) answers 409 rather than 500.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from console.context import ConsoleContext
from console.http import ApiError
from gateway.store.assistant.refused import Refused
from gateway.store.conflicts import WriteConflict, refusing_conflicts

T = TypeVar("T")


async def run(ctx: ConsoleContext, fn: Callable[..., T], *args: Any) -> T:
    try:
        return await ctx.db.transaction(refusing_conflicts, fn, *args)
    except Refused as refusal:
        raise ApiError(refusal.status, refusal.message, extra=refusal.extra) from None
    except WriteConflict:
        raise ApiError(409, "The change conflicts with an existing record") from None
