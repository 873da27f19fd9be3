"""Turns a ``PUT /api/settings`` body into the rows to write, or refuses it whole (§5.4).

Every key is checked before anything is written (contract weakness 13): aliases resolved,
values converted and normalised, secrets kept when blank, nested secrets merged, then the
cross-key rules applied to the would-be result.  The caller writes the rows in one transaction.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import orjson

from gateway.settings import catalog_secrets
from gateway.settings.catalog import SPECS, resolve_key
from gateway.settings.spec import SettingError, parse_bool, to_stored_text

#: keys whose new value depends on the stored one (secrets nested in JSON)
MERGES: dict[str, Callable[[str, str | None], str]] = {
    "oauth_providers": catalog_secrets.merge_oauth_providers,
    "payment_channels": catalog_secrets.merge_payment_channels,
}
REDIS_PASSWORD_CLEAR = "redis_password_clear"


def _is_shown_flag(given: str) -> bool:
    """``<secret>_set`` flags are GET output; a UI sending them back is not an error."""
    if not given.endswith("_set"):
        return False
    spec = SPECS.get(given[: -len("_set")])
    return spec is not None and spec.secret


def _json_text(key: str, text: str) -> str:
    if not text:
        return text
    try:
        orjson.loads(text)
    except orjson.JSONDecodeError:
        raise SettingError(key, f"{key} must be valid JSON") from None
    return text


def _clear_flag(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false", "1", "0", ""):
        return value.strip().lower() in ("true", "1")
    raise SettingError(REDIS_PASSWORD_CLEAR, "redis_password_clear must be a boolean")


def plan_update(body: Mapping[str, Any], stored: Callable[[str], str | None], *,
                node_name: str = "") -> dict[str, str]:
    """The rows a PUT body writes; raises ``SettingError`` (writing nothing) on any bad key.

    ``stored(key)`` returns the current stored text (or ``None``); ``node_name`` is this
    process's node name (multi-node mode needs one).
    """
    rows: dict[str, str] = {}
    given_as: dict[str, str] = {}
    clear_redis_password = False
    for given, value in body.items():
        if given == REDIS_PASSWORD_CLEAR:
            clear_redis_password = _clear_flag(value)
            continue
        if _is_shown_flag(given):
            continue
        key = resolve_key(given)
        spec = SPECS.get(key)
        if spec is None or spec.internal:
            raise SettingError(given, f"Unknown setting {given}")
        if spec.readonly:
            continue  # derived values are shown, never stored
        if key in given_as:
            raise SettingError(given, f"{given} is given twice (also as {given_as[key]})")
        given_as[key] = given
        if value is None:
            raise SettingError(given, f"{given} must not be null")
        try:
            text = to_stored_text(spec, value)
            if spec.secret and text == "":
                continue  # a blank secret keeps the stored value
            if spec.check is not None:
                text = spec.check(text)
            if key in MERGES:
                text = MERGES[key](text, stored(key))
            elif spec.kind == "json" and spec.check is None:
                text = _json_text(key, text)
        except SettingError as exc:
            raise SettingError(given, str(exc)) from None
        rows[key] = text
    if clear_redis_password:
        if rows.get("redis_password"):
            raise SettingError(REDIS_PASSWORD_CLEAR,
                               "redis_password and redis_password_clear cannot be combined")
        rows["redis_password"] = ""
    _check_combined(rows, stored, node_name)
    return rows


def _check_combined(rows: Mapping[str, str], stored: Callable[[str], str | None],
                    node_name: str) -> None:
    def after(key: str) -> str:
        if key in rows:
            return rows[key]
        current = stored(key)
        return SPECS[key].default if current is None else current

    def flag(key: str) -> bool:
        return parse_bool(after(key), parse_bool(SPECS[key].default, False))

    if ("redis_enabled" in rows or "redis_address" in rows) and flag("redis_enabled") \
            and not after("redis_address").strip():
        raise SettingError("redis_address", "Redis address is required when Redis is enabled")
    if rows.get("multi_node_enabled") == "true" and not node_name:
        raise SettingError("multi_node_enabled",
                           "Multi-node mode requires a node name in the environment "
                           "(LOCKGATE_NODE_NAME)")
