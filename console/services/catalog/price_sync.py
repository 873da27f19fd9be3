"""Price sync (console contract §5.10): read an upstream's prices, preview them, apply them.

Prices land in **global** models: apply creates a missing model (enabled) or overwrites its
quota type, the four synced prices and their tier lists, refreshing the provider when the
name makes one obvious.  The whole apply is one transaction -- any invalid item refuses the
request before anything is written -- and the catalog caches are told afterwards.

Previews change nothing; the browser preview parses a pasted body and makes no request.  The
server-side fetch follows the rules of ``console.services.model_sync`` (SSRF policy, channel
host only); ``/api/pricing`` is public on new-api style upstreams and is read without the key.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from console.context import ConsoleContext
from console.http import ApiError, bad_request
from console.services.catalog import tx as catalog_tx
from console.services.catalog.model_sync import (
    MAX_ITEMS,
    fetch_from_channel,
    load_channel,
    parse_browser_payload,
    refused_by_policy,
    result,
    upstream_failed,
)
from console.services.catalog.views import provider_name
from gateway.billing.money import AmountError, parse_decimal, to_nanos
from gateway.billing.tiers import TierError, normalise_tiers
from gateway.invalidation import CATALOG
from gateway.store.channel_sync import SyncChannel, existing_model_names
from gateway.store.connection import Connection
from gateway.store.models import create_model, model_by_name, update_model
from gateway.sync.fetch import FetchError, FetchRefused
from gateway.sync.model_lists import SyncFormatError
from gateway.sync.prices import (
    PRICE_FIELDS,
    UNAUTHENTICATED,
    PriceItem,
    parse_prices,
    price_paths,
)
from gateway.sync.providers import CUSTOM, guess_provider

SOURCE = "prices"


async def _envelope(ctx: ConsoleContext, channel: SyncChannel, source: str,
                    items: list[PriceItem]) -> dict[str, Any]:
    names = [item.model_name for item in items]
    known = await ctx.db.transaction(existing_model_names, names)
    models = []
    for item in items:
        wire = item.wire()
        provider = guess_provider(item.model_name)
        wire.update(provider=provider, provider_name=provider_name(provider),
                    provider_icon_url="", exists=item.model_name in known)
        models.append(wire)
    return {"channel_id": channel.id, "channel_name": channel.name, "source": source,
            "models": models}


async def fetch_items(ctx: ConsoleContext, channel: SyncChannel, fmt: str | None,
                      path: str | None) -> tuple[str, list[PriceItem]]:
    """``(source path, price items)`` from the channel; the first non-empty answer wins."""
    try:
        paths = price_paths(fmt, path)
    except SyncFormatError as exc:
        raise bad_request(str(exc), field="path" if "path" in str(exc) else "format") from None
    failures = []
    for candidate in paths:
        try:
            body = await fetch_from_channel(ctx, channel, candidate,
                                            with_key=candidate not in UNAUTHENTICATED)
            items = parse_prices(body)
        except FetchRefused as exc:
            raise refused_by_policy("price sync", exc) from None
        except (FetchError, SyncFormatError) as exc:
            failures.append(f"{candidate}: {exc}")
            continue
        if items:
            return candidate, items
        failures.append(f"{candidate}: no prices found")
    raise upstream_failed("price sync", failures)


async def preview(ctx: ConsoleContext, channel_id: Any, fmt: str | None,
                  path: str | None) -> dict[str, Any]:
    channel = await load_channel(ctx, channel_id)
    source, items = await fetch_items(ctx, channel, fmt, path)
    return await _envelope(ctx, channel, source, items)


async def preview_browser(ctx: ConsoleContext, channel_id: Any, source: str,
                          payload: Any) -> dict[str, Any]:
    channel = await load_channel(ctx, channel_id)
    items = parse_browser_payload(payload, parse_prices)
    return await _envelope(ctx, channel, source or "browser", items)


def _price(item: dict[str, Any], name: str, index: int) -> int:
    value = item.get(name)
    if value is None:
        return 0
    try:
        return to_nanos(parse_decimal(value))
    except AmountError as exc:
        raise bad_request(f"models[{index}].{name} {exc}", field="models") from None


def price_values(items: Any) -> list[tuple[str, dict[str, Any]]]:
    """Validate every apply item first: ``[(model name, column values)]``."""
    if not isinstance(items, list) or not items:
        raise bad_request("No models selected", field="models")
    if len(items) > MAX_ITEMS:
        raise bad_request(f"at most {MAX_ITEMS} models per apply", field="models")
    chosen: dict[str, dict[str, Any]] = {}
    for index, item in enumerate(items):
        if not isinstance(item, dict):
            raise bad_request(f"models[{index}] must be an object", field="models")
        name = item.get("model_name")
        if not isinstance(name, str) or not name.strip() or len(name.strip()) > 100:
            raise bad_request(f"models[{index}]: model_name is required", field="models")
        quota_type = item.get("quota_type", 0)
        if quota_type is None:
            quota_type = 0
        if isinstance(quota_type, bool) or quota_type not in (0, 1, 100):
            raise bad_request(f"models[{index}].quota_type must be 0, 1 or 100",
                              field="models")
        values: dict[str, Any] = {"quota_type": int(quota_type)}
        for price in PRICE_FIELDS:
            values[f"{price}_nanos"] = _price(item, price, index)
            try:
                values[f"{price}_tiers"] = normalise_tiers(item.get(f"{price}_tiers"))
            except TierError as exc:
                raise bad_request(f"models[{index}].{price}_tiers: {exc}",
                                  field="models") from None
        chosen[name.strip()] = values
    return sorted(chosen.items())


def apply_prices(conn: Connection, entries: list[tuple[str, dict[str, Any]]],
                 now: datetime, *, create: bool = True) -> tuple[int, int]:
    """Create (unless ``create`` is false) or overwrite the global models;
    ``(created, updated)``."""
    created = updated = 0
    for name, values in entries:
        provider = guess_provider(name)
        found = model_by_name(conn, name)
        if found is None and not create:
            continue
        if found is None:
            create_model(conn, {"model_name": name, "provider": provider,
                                "provider_icon_url": "", "enabled": True, **values}, now)
            created += 1
            continue
        changes = dict(values)
        if provider != CUSTOM and found["provider"] != provider:
            changes["provider"] = provider
        update_model(conn, found["id"], changes, now)
        updated += 1
    return created, updated


async def apply(ctx: ConsoleContext, channel_id: Any, items: Any) -> dict[str, Any]:
    channel = await load_channel(ctx, channel_id)
    entries = price_values(items)
    try:
        created, updated = await catalog_tx.run(ctx, apply_prices, entries, ctx.now())
    except ApiError:
        raise
    except Exception as exc:
        failed = result(channel, SOURCE, error="apply failed")
        raise ApiError(500, "Price sync apply failed", extra={"result": failed}) from exc
    await ctx.invalidation.announce(CATALOG)
    return {"results": [result(channel, SOURCE, created, updated)]}


