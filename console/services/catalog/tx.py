"""Runs one admin catalog write: one transaction, errors as JSON, then cache invalidation.

Every successful catalog write must make the gateway's in-memory catalog reload on every node
(``CATALOG`` announcement); a refused write (``CatalogError``, or a unique index caught only by
the database in a race) rolls back and answers 4xx without announcing anything.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from console.context import ConsoleContext
from console.http import ApiError
from gateway.invalidation import CATALOG
from gateway.store.catalog_admin import CatalogError, load_catalog
from gateway.store.conflicts import WriteConflict, refusing_conflicts

T = TypeVar("T")


async def run(ctx: ConsoleContext, fn: Callable[..., T], *args: Any) -> T:
    """Run ``fn(conn, *args)`` in a transaction, mapping refusals to ``ApiError``."""
    try:
        return await ctx.db.transaction(refusing_conflicts, fn, *args)
    except CatalogError as error:
        raise ApiError(error.status, error.message, field=error.field) from None
    except WriteConflict:
        raise ApiError(409, "The change conflicts with an existing record") from None


async def write(ctx: ConsoleContext, fn: Callable[..., T], *args: Any) -> T:
    """``run`` a catalog write, then announce ``CATALOG`` so every node reloads."""
    result = await run(ctx, fn, *args)
    await ctx.invalidation.announce(CATALOG)
    return result


async def catalog(ctx: ConsoleContext) -> dict[str, Any]:
    return await ctx.db.transaction(load_catalog)
