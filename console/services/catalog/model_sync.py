"""Model sync (console contract §5.10): read a channel's model list, preview it, apply it.

- ``preview`` fetches the list in the asked ``format`` and changes nothing; ``preview_browser``
  parses a body the admin's browser fetched and makes no outbound request at all.
- ``apply`` (selected items) and ``sync`` (auto-discovered, per channel) ensure a global model
  per name (created enabled; an existing model is never changed) and a config per (channel,
  model, upstream name), enabling a disabled one.  Each channel is one transaction, announced
  to every node's catalog cache afterwards.

Server-side fetches go to the channel's own base URL only (custom paths are reduced to a path),
pass the SSRF policy first, and carry the channel key only when the URL's host is the
channel's host -- the key never leaves for another host.  A preview refused by our own SSRF
policy is a 400 carrying the policy's reason; an upstream that cannot be reached or answers
nothing usable on any path is a 502.  ``sync`` isolates channels: whatever fails for one
channel is reported in its result and the others are still synced.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar
from urllib.parse import urlsplit

from twisted.logger import Logger

from console.context import ConsoleContext
from console.http import ApiError, bad_request
from console.path_ids import MAX_ID
from console.services.catalog import tx as catalog_tx
from console.services.catalog.views import provider_name
from console.validation import integer_text
from gateway.channels.net_policy import UnsafeUrl, UrlPolicy, check_url
from gateway.invalidation import CATALOG
from gateway.store import channel_sync as sync_store
from gateway.store.channel_sync import SyncChannel, WantedConfig
from gateway.sync.fetch import FetchError, FetchRefused, fetch
from gateway.sync.model_lists import (
    SyncFormatError,
    join_url,
    model_list_paths,
    parse_model_names,
)
from gateway.sync.providers import guess_provider

log = Logger()

FETCH_TIMEOUT = 30.0
FETCH_LIMIT = 8 << 20
MAX_ITEMS = 5000


async def load_channel(ctx: ConsoleContext, channel_id: Any) -> SyncChannel:
    if isinstance(channel_id, str):
        channel_id = integer_text(channel_id)
    if (isinstance(channel_id, bool) or not isinstance(channel_id, int) or channel_id <= 0
            or channel_id > MAX_ID):
        raise bad_request("Channel is required", field="channel_id")
    return await catalog_tx.run(ctx, sync_store.channel, channel_id)


def channel_headers(channel: SyncChannel, url: str, *, with_key: bool) -> dict[str, str]:
    """The channel key as a Bearer token -- only towards the channel's own host."""
    headers = {"accept": "application/json"}
    key = (channel.api_key or "").strip()
    same_host = (urlsplit(url).hostname or "") == (urlsplit(channel.base_url).hostname or "")
    if with_key and key and same_host:
        headers["authorization"] = f"Bearer {key}"
    return headers


async def fetch_from_channel(ctx: ConsoleContext, channel: SyncChannel, path: str, *,
                             with_key: bool = True) -> bytes:
    """GET ``path`` under the channel's base URL; ``FetchError`` unless it answers 2xx."""
    url = join_url(channel.base_url, path)
    policy = UrlPolicy.from_settings(ctx.settings)
    try:
        check_url(url, policy)
    except UnsafeUrl as exc:
        raise FetchRefused(f"unsafe upstream URL: {exc}") from None
    fetched = await fetch(ctx.reactor, ctx.clock, url,
                          headers=channel_headers(channel, url, with_key=with_key),
                          timeout=FETCH_TIMEOUT, limit=FETCH_LIMIT, policy=policy)
    if not 200 <= fetched.status < 300:
        raise FetchError(f"HTTP {fetched.status}")
    return fetched.body


async def discover(ctx: ConsoleContext, channel: SyncChannel, fmt: str | None,
                   path: str | None) -> tuple[str, list[str]]:
    """``(source path, model names)``; the first path giving a non-empty list wins."""
    try:
        paths = model_list_paths(fmt, path)
    except SyncFormatError as exc:
        raise bad_request(str(exc), field="path" if "path" in str(exc) else "format") from None
    failures = []
    for candidate in paths:
        try:
            names = parse_model_names(await fetch_from_channel(ctx, channel, candidate))
        except FetchRefused as exc:
            raise refused_by_policy("model list sync", exc) from None
        except (FetchError, SyncFormatError) as exc:
            failures.append(f"{candidate}: {exc}")
            continue
        if names:
            return candidate, names
        failures.append(f"{candidate}: no models found")
    raise upstream_failed("model list sync", failures)


def refused_by_policy(what: str, exc: FetchRefused) -> ApiError:
    """400: our own SSRF policy refused the channel's upstream -- the admin's to change."""
    return ApiError(400, f"{what} refused: {exc}", type="ssrf_blocked")


def upstream_failed(what: str, failures: list[str]) -> ApiError:
    """502: the upstream could not be reached or gave no usable answer on any path."""
    return ApiError(502, f"{what} failed: " + "; ".join(failures), type="sync_failed")


def sync_item(name: str, exists: bool) -> dict[str, Any]:
    provider = guess_provider(name)
    item: dict[str, Any] = {"model_name": name, "quota_type": 0}
    for price in ("input_price", "output_price", "cached_input_price",
                  "cache_write_input_price"):
        item[price] = "0"
    for price in ("input_price", "output_price", "cached_input_price",
                  "cache_write_input_price"):
        item[f"{price}_tiers"] = None
    item.update(provider=provider, provider_name=provider_name(provider),
                provider_icon_url="", exists=exists)
    return item


async def _envelope(ctx: ConsoleContext, channel: SyncChannel, source: str,
                    names: list[str]) -> dict[str, Any]:
    known = await ctx.db.transaction(sync_store.configured_model_names, channel.id)
    return {"channel_id": channel.id, "channel_name": channel.name, "source": source,
            "models": [sync_item(name, name in known) for name in names]}


T = TypeVar("T")


async def preview(ctx: ConsoleContext, channel_id: Any, fmt: str | None,
                  path: str | None) -> dict[str, Any]:
    channel = await load_channel(ctx, channel_id)
    source, names = await discover(ctx, channel, fmt, path)
    return await _envelope(ctx, channel, source, names)


def parse_browser_payload(payload: Any, parse: Callable[[Any], T]) -> T:
    """A response the browser fetched and pasted (both sync families): 400s name ``payload``."""
    if payload is None:
        raise bad_request("Payload is required", field="payload")
    try:
        return parse(payload)
    except SyncFormatError as exc:
        raise bad_request(str(exc), field="payload") from None


async def preview_browser(ctx: ConsoleContext, channel_id: Any, source: str,
                          payload: Any) -> dict[str, Any]:
    channel = await load_channel(ctx, channel_id)
    names = parse_browser_payload(payload, parse_model_names)
    return await _envelope(ctx, channel, source or "browser", names)


def selected_names(items: Any) -> list[tuple[str, str]]:
    """``[(model name, upstream name)]`` from apply items (objects or bare names)."""
    if not isinstance(items, list) or not items:
        raise bad_request("No models selected", field="models")
    if len(items) > MAX_ITEMS:
        raise bad_request(f"at most {MAX_ITEMS} models per apply", field="models")
    chosen: dict[str, str] = {}
    for index, item in enumerate(items):
        raw = item if isinstance(item, str) else (
            item.get("model_name") if isinstance(item, dict) else None)
        if not isinstance(raw, str) or not raw.strip() or len(raw.strip()) > 100:
            raise bad_request(f"models[{index}]: model_name is required", field="models")
        upstream = item.get("upstream_model_name") if isinstance(item, dict) else None
        if upstream is not None and (not isinstance(upstream, str) or len(upstream) > 200):
            raise bad_request(f"models[{index}]: invalid upstream_model_name", field="models")
        chosen[raw.strip()] = (upstream or "").strip() or raw.strip()
    return sorted(chosen.items())


def wanted_configs(pairs: list[tuple[str, str]]) -> list[WantedConfig]:
    """The configs ``[(model name, upstream name)]`` ask for, with each name's provider."""
    return [WantedConfig(name, upstream, guess_provider(name)) for name, upstream in pairs]


def result(channel: SyncChannel, source: str, created: int = 0, updated: int = 0,
           error: str | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"channel_id": channel.id, "channel_name": channel.name,
                           "source": source, "created": created, "updated": updated}
    if error is not None:
        out["error"] = error
    return out


async def apply(ctx: ConsoleContext, channel_id: Any, items: Any) -> dict[str, Any]:
    channel = await load_channel(ctx, channel_id)
    pairs = selected_names(items)
    try:
        created, updated = await catalog_tx.run(ctx, sync_store.ensure_configs, channel.id,
                                                wanted_configs(pairs), ctx.now())
    except ApiError:
        raise
    except Exception as exc:
        failed = result(channel, "selected", error="apply failed")
        raise ApiError(500, "Model sync apply failed", extra={"result": failed}) from exc
    await ctx.invalidation.announce(CATALOG)
    return {"results": [result(channel, "selected", created, updated)]}


async def sync(ctx: ConsoleContext, channel_ids: list[int]) -> dict[str, Any]:
    """Auto-discover and apply per channel; one channel's failure does not stop the rest."""
    channels = await ctx.db.transaction(sync_store.channels_to_sync, channel_ids)
    missing = sorted(set(channel_ids) - {channel.id for channel in channels})
    if missing:
        raise bad_request(f"Channel not found: {', '.join(map(str, missing))}",
                          field="channel_ids")
    results = []
    changed = False
    for channel in channels:
        try:
            source, names = await discover(ctx, channel, "auto", None)
            pairs = [(name, name) for name in names[:MAX_ITEMS]]
            created, updated = await catalog_tx.run(ctx, sync_store.ensure_configs,
                                                    channel.id, wanted_configs(pairs),
                                                    ctx.now())
        except ApiError as exc:
            results.append(result(channel, "auto", error=exc.message))
            continue
        except Exception:  # one channel's failure (bad stored data, ...) never stops the rest
            log.failure("model sync of channel {id} failed", id=channel.id)
            results.append(result(channel, "auto", error="model sync failed"))
            continue
        changed = changed or bool(created or updated)
        results.append(result(channel, source, created, updated))
    if changed:
        await ctx.invalidation.announce(CATALOG)
    return {"results": results}
