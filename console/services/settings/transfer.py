"""Configuration backup and restore: ``POST /api/settings/export`` and ``/import`` (§5.5).

Export writes the chosen sections (all four when the body is empty, decision D13) as one
pretty-printed JSON download that is never cached.  It carries secrets in clear -- setting
secrets and upstream keys -- because a backup that cannot restore them is not a backup; the
route is admin-only and the answer is ``no-store``.

Import is all-or-nothing (contract weakness: a half-applied restore):

1. every record of every section is validated first, with the same rules as the console's own
   writes (settings through ``Settings.validate_update``: unknown keys refused, a blank secret
   keeps the stored one; channels, models, prices and configs through the admin routes' field
   readers, upstream URLs through ``gateway.net_policy``), so a bad record answers 400 naming
   it and nothing is written;
2. everything is applied in ONE transaction, in the order settings -> user channels ->
   channels -> models -> prices -> configs; records are matched by name (channels by name +
   base URL) and overwritten, records absent from the file stay, nothing is deleted; a missing
   reference found there rolls the whole import back;
3. then the catalog and the settings are reloaded on every node.

Users, keys, balances, orders, logs, groups and internal bookkeeping settings are never read
from or written to a file.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson
from twisted.logger import Logger

from console.context import ConsoleContext
from console.http import ApiError, bad_request, read_json, read_object, write_json
from console.routes.channels import channel_values
from console.routes.models import model_values, price_form
from console.routes.user_channels import user_channel_values
from console.services.catalog.inputs import config_values
from console.user_view import timestamp
from console.validation import Body
from gateway.billing.money import format_nanos
from gateway.channels.net_policy import UrlPolicy
from gateway.invalidation import CATALOG
from gateway.settings.catalog import SPECS
from gateway.settings.spec import SettingError
from gateway.settings.store import Settings
from gateway.store.config_transfer import ImportRefused, apply_config_plan, read_config_tables
from gateway.store.conflicts import WriteConflict, refusing_conflicts
from gateway.store.connection import Connection
from gateway.store.schema import OVERRIDE_PRICE_NAMES, PRICE_NAMES

VERSION = 1
SECTIONS = ("system_settings", "channels", "model_data", "model_prices")
IMPORT_LIMIT = 20 << 20
log = Logger()
PRICE_COLUMNS = ("quota_type", *(f"{n}_nanos" for n in PRICE_NAMES),
                 *(f"{n}_tiers" for n in PRICE_NAMES), "video_billing_config")


def parse_sections(raw: Any, *, default_all: bool) -> list[str]:
    """Normalised section names (case-insensitive, duplicates dropped, order kept)."""
    if raw is None and default_all:
        return list(SECTIONS)
    if not isinstance(raw, list) or not all(isinstance(s, str) for s in raw):
        raise bad_request("sections must be an array of section names", field="sections")
    chosen: list[str] = []
    for name in raw:
        key = name.strip().lower()
        if key not in SECTIONS:
            raise bad_request("Unsupported configuration section", field="sections")
        if key not in chosen:
            chosen.append(key)
    if not chosen:
        if default_all:
            return list(SECTIONS)
        raise bad_request("Select at least one configuration section", field="sections")
    return chosen


# --- export ---------------------------------------------------------------------------------

def read_config(conn: Connection, sections: list[str]) -> dict[str, Any]:
    """The export document's sections, read in one transaction."""
    tables = read_config_tables(conn, settings="system_settings" in sections,
                                configs="model_prices" in sections)
    doc: dict[str, Any] = {}
    ucs = {r["id"]: r for r in tables.user_channels}
    chans = {r["id"]: r for r in tables.channels}
    models = {r["id"]: r for r in tables.models}
    if "system_settings" in sections:
        doc["system_settings"] = [
            {"key": r["key"], "value": r["value"], "created_at": timestamp(r["created_at"]),
             "updated_at": timestamp(r["updated_at"])}
            for r in tables.settings]
    if "channels" in sections:
        doc["user_channels"] = [_user_channel_doc(uc) for uc in ucs.values()]
        doc["channels"] = [_channel_doc(ch, ucs) for ch in chans.values()]
    if "model_data" in sections:
        doc["models"] = [{"model_name": m["model_name"], "display_name": m["display_name"],
                          "provider": m["provider"],
                          "provider_icon_url": m["provider_icon_url"], "enabled": m["enabled"]}
                         for m in models.values()]
    if "model_prices" in sections:
        doc["model_prices"] = [_price_doc(m) for m in models.values()]
        doc["model_configs"] = [_config_doc(c, chans, models) for c in tables.configs
                                if c["channel_id"] in chans and c["model_id"] in models]
    return doc


def _user_channel_doc(uc: dict[str, Any]) -> dict[str, Any]:
    return {"name": uc["name"], "description": uc["description"],
            "multiplier": format_nanos(uc["multiplier_nanos"]),
            "routing_algorithm": uc["routing_algorithm"], "enabled": uc["enabled"],
            "rate_limit_enabled": uc["rate_limit_enabled"],
            "rate_limit_requests_per_minute": uc["rate_limit_requests_per_minute"],
            "rate_limit_burst": uc["rate_limit_burst"]}


def _channel_doc(ch: dict[str, Any], ucs: dict[int, Any]) -> dict[str, Any]:
    uc = ucs.get(ch["user_channel_id"])
    return {"name": ch["name"], "type": ch["type"], "base_url": ch["base_url"],
            "api_key": ch["api_key"], "plugin_config": ch["plugin_config"],
            "user_channel_name": uc["name"] if uc else "",
            "multiplier": format_nanos(ch["multiplier_nanos"]), "priority": ch["priority"],
            "weight": ch["weight"], "enabled": ch["enabled"],
            "price_sync_enabled": ch["price_sync_enabled"],
            "price_sync_cron": ch["price_sync_cron"]}


def _price_doc(m: dict[str, Any]) -> dict[str, Any]:
    doc: dict[str, Any] = {"model_name": m["model_name"], "quota_type": m["quota_type"]}
    for name in PRICE_NAMES:
        doc[name] = format_nanos(m[f"{name}_nanos"])
    for name in PRICE_NAMES:
        doc[f"{name}_tiers"] = m[f"{name}_tiers"] or []
    doc["video_billing_config"] = m["video_billing_config"] or {"resolutions": []}
    return doc


def _config_doc(c: dict[str, Any], chans: dict[int, Any], models: dict[int, Any]) -> dict[str, Any]:
    ch, model = chans[c["channel_id"]], models[c["model_id"]]
    doc: dict[str, Any] = {"channel_name": ch["name"], "channel_base_url": ch["base_url"],
                           "model_name": model["model_name"],
                           "upstream_model_name": c["upstream_model_name"]}
    for name in OVERRIDE_PRICE_NAMES:
        nanos = c[f"{name}_nanos"]
        doc[name] = None if nanos is None else format_nanos(nanos)
    doc["enabled"] = c["enabled"]
    return doc


async def export_document(ctx: ConsoleContext, body: dict[str, Any]) -> tuple[bytes, str]:
    """The pretty-printed document and its download file name."""
    sections = parse_sections(body.get("sections"), default_all=True)
    now = ctx.now()
    doc: dict[str, Any] = {"version": VERSION, "exported_at": timestamp(now),
                           "sections": sections}
    doc.update(await ctx.db.transaction(read_config, sections))
    name = f"lockgate-configuration-{now.strftime('%Y%m%d-%H%M%S')}.json"
    return orjson.dumps(doc, option=orjson.OPT_INDENT_2), name


# --- import: validation ---------------------------------------------------------------------

def _records(doc: dict[str, Any], key: str) -> list[dict[str, Any]]:
    items = doc.get(key, [])
    if items is None:
        return []
    if not isinstance(items, list) or not all(isinstance(i, dict) for i in items):
        raise bad_request(f"{key} must be an array of objects", field=key)
    return items


def _each(doc: dict[str, Any], key: str,
          read: Callable[[Body], dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for index, record in enumerate(_records(doc, key)):
        try:
            out.append(read(Body(record)))
        except ApiError as exc:
            raise bad_request(f"{key}[{index}]: {exc.message}", field=exc.field) from None
    return out


def _without(record: Body, *names: str) -> Body:
    return Body({k: v for k, v in record.data.items() if k not in names})


def _name(record: Body, field: str, label: str) -> str:
    value = record.string(field, max_length=200)
    if not value:
        raise bad_request(f"{label} is required", field=field)
    return str(value)


def _settings_rows(settings: Settings, node_name: str, doc: dict[str, Any]) -> dict[str, str]:
    given: dict[str, Any] = {}
    for index, record in enumerate(_records(doc, "system_settings")):
        key = record.get("key")
        if not isinstance(key, str) or not key.strip():
            raise bad_request(f"system_settings[{index}]: System setting key is required",
                              field="key")
        spec = SPECS.get(key.strip())
        if spec is not None and (spec.internal or spec.readonly):
            continue  # server bookkeeping and derived values are not configuration
        if key.strip() in given:
            raise bad_request(f"system_settings[{index}]: {key} is given twice", field=key)
        given[key.strip()] = record.get("value")
    try:
        return settings.validate_update(given, node_name=node_name)
    except SettingError as exc:
        raise bad_request(f"system_settings: {exc}", field=exc.key) from None


def validate_import(ctx: ConsoleContext, doc: Any) -> dict[str, Any]:
    """Check the whole document; returns the plan ``apply_config_plan`` writes. Raises
    ApiError."""
    return validate_document(ctx.settings, ctx.node_name, doc)


def validate_document(settings: Settings, node_name: str, doc: Any) -> dict[str, Any]:
    """``validate_import`` against given settings (``lockgate-admin import`` has no console)."""
    if not isinstance(doc, dict):
        raise bad_request("Invalid configuration file")
    if doc.get("version") != VERSION or isinstance(doc.get("version"), bool):
        raise bad_request("Unsupported configuration export version", field="version")
    sections = parse_sections(doc.get("sections"), default_all=False)
    policy = UrlPolicy.from_settings(settings)
    plan: dict[str, Any] = {"sections": sections, "settings": {}, "user_channels": [],
                            "channels": [], "models": [], "prices": [], "configs": []}
    if "system_settings" in sections:
        plan["settings"] = _settings_rows(settings, node_name, doc)
    if "channels" in sections:
        plan["user_channels"] = _each(doc, "user_channels",
                                      lambda r: user_channel_values(r, creating=True))
        plan["channels"] = _each(doc, "channels", lambda r: {
            "values": channel_values(_without(r, "user_channel_name", "user_channel_id"),
                                     policy, creating=True),
            "user_channel_name": r.string("user_channel_name", max_length=100) or ""})
    if "model_data" in sections:
        plan["models"] = _each(doc, "models", lambda r: {
            k: v for k, v in model_values(r, creating=True).items() if k not in PRICE_COLUMNS})
    if "model_prices" in sections:
        plan["prices"] = _each(doc, "model_prices", lambda r: {
            "model_name": _name(r, "model_name", "Model"), "values": price_form(r)})
        plan["configs"] = _each(doc, "model_configs", lambda r: {
            "channel_name": _name(r, "channel_name", "Channel name"),
            "channel_base_url": _name(r, "channel_base_url", "Channel base URL"),
            "model_name": _name(r, "model_name", "Model"),
            "upstream_model_name": r.string("upstream_model_name", max_length=200) or "",
            "values": config_values(_without(r, "upstream_model_name"))})
    return plan


async def import_document(ctx: ConsoleContext, doc: Any) -> dict[str, Any]:
    plan = validate_import(ctx, doc)
    try:
        await ctx.db.transaction(refusing_conflicts, apply_config_plan, plan, ctx.now())
    except ImportRefused as exc:
        raise bad_request(str(exc)) from None
    await ctx.invalidation.announce(CATALOG)
    if plan["settings"]:
        await ctx.live_settings.announce()
    return {"imported_sections": plan["sections"]}


# --- HTTP glue (called from ``console.routes.settings``) ------------------------------------

async def export_response(ctx: ConsoleContext, request: Any) -> bytes:
    """``POST /api/settings/export``: the document as an uncacheable attachment."""
    try:
        await ctx.sessions.admin(request)
        data, name = await export_document(ctx, read_object(request, optional=True))
    except ApiError as error:
        return write_json(request, error.status, error.body())
    except Exception:
        log.failure("configuration export failed")
        return write_json(request, 500, {"error": "Internal server error", "type": "internal"})
    request.setResponseCode(200)
    request.setHeader(b"content-type", b"application/json")
    request.setHeader(b"cache-control", b"no-store")
    request.setHeader(b"content-disposition", f'attachment; filename="{name}"'.encode())
    return data


async def import_request(ctx: ConsoleContext, request: Any) -> dict[str, Any]:
    """``POST /api/settings/import`` (inside ``json_route``)."""
    await ctx.sessions.admin(request)
    try:
        doc = read_json(request, limit=IMPORT_LIMIT)
    except ApiError as error:
        if error.status == 400:
            raise bad_request("Invalid configuration file") from None
        raise
    try:
        return await import_document(ctx, doc)
    except WriteConflict:
        raise bad_request("The configuration conflicts with an existing record") from None
