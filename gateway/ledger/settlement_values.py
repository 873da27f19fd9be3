"""A ``SettlementRecord`` straight to its batch item: billing inputs and usage-log parameters.

Why (issue 22): every /v1 request queues one settlement, on the reactor thread.  Going through
``SettlementRecord.row()`` (a dict of every usage-log column) and then
``settlement_rows.prepare`` (that dict back to a list in ``LOG_COLUMNS`` order, clipped, JSON,
time text) built each value twice, ~20 µs a request.  Here the values are written once, in
column order, from the record's fields; the item keeps only the billing inputs the batch reads
(``billing_writes._write``) and the settlement metrics read (token counts).

The result is the same as ``prepare(record.row(), dialect)``, value for value (a test holds
the two side by side); ``COLUMN_ORDER`` below is checked against the schema's column order at
import, so a column added to ``usage_logs`` fails loudly here rather than shifting values.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import orjson

from gateway.store.driver_sql import timestamp_param
from gateway.store.second_texts import SecondTexts
from gateway.store.settlement_rows import (
    ERROR_MESSAGE_LIMIT,
    LOG_COLUMNS,
    TEXT_LIMITS,
    PreparedSettlement,
)
from gateway.store.usage_rollups import hour_of

if TYPE_CHECKING:
    from gateway.ledger.settlement import SettlementRecord

#: the order ``prepared_settlement`` writes its values in (must be ``LOG_COLUMNS``)
COLUMN_ORDER = (
    "request_id", "user_id", "api_key_id", "user_channel_id", "channel_id", "model_config_id",
    "model_name", "endpoint", "is_stream", "input_tokens", "output_tokens",
    "cached_input_tokens", "cache_write_input_tokens", "cache_write_1h_input_tokens",
    "image_input_tokens", "image_output_tokens", "audio_input_tokens", "audio_output_tokens",
    "response_time_ms", "first_response_time_ms", "base_cost_nanos", "group_multiplier_nanos",
    "user_channel_multiplier_nanos", "prices", "cost_nanos", "subscription_cost_nanos",
    "pricing_formula", "status", "error_message", "upstream_status", "failure_reason",
    "meta_model_name", "ip", "user_agent", "created_at")
if COLUMN_ORDER != LOG_COLUMNS:
    raise RuntimeError("usage_logs columns changed: update settlement_values.COLUMN_ORDER "
                       f"to {LOG_COLUMNS}")

_ONE = 1_000_000_000  # a multiplier of 1 in nanos (no cost: nothing was multiplied)
_CLIPPED = ("request_id", "model_name", "endpoint", "failure_reason", "ip")
if set(TEXT_LIMITS) != set(_CLIPPED):
    raise RuntimeError("settlement_rows.TEXT_LIMITS changed: clip the same columns here")
_REQUEST_ID, _MODEL, _ENDPOINT, _REASON, _IP = (TEXT_LIMITS[name] for name in _CLIPPED)


def _clipped(value: Any, limit: int) -> Any:
    """``value`` cut to its column's length (``settlement_rows.TEXT_LIMITS``); non-text as is."""
    return value[:limit] if isinstance(value, str) and len(value) > limit else value


def prepared_settlement(record: SettlementRecord, dialect: str,
                        times: SecondTexts) -> PreparedSettlement:
    """``prepare(record.row(), dialect)`` in one pass; ``times`` converts ``created_at``."""
    u = record.usage.clamped()
    cost = record.cost
    if cost is None:
        cost_nanos = base_nanos = 0
        group_nanos = user_channel_nanos = _ONE
        formula = ""
    else:
        cost_nanos = cost.cost_nanos
        base_nanos = cost.base_cost_nanos
        group_nanos = cost.group_multiplier_nanos
        user_channel_nanos = cost.user_channel_multiplier_nanos
        formula = cost.formula
    prices = record.prices
    prices_json = None if prices is None else orjson.dumps(
        prices if type(prices) is dict else dict(prices), option=orjson.OPT_SORT_KEYS).decode()
    created = record.created_at
    created_value: Any = None
    hour = None
    if created is not None:
        if dialect == "sqlite":
            created_value, hour = times.sqlite_text_and_hour(created)
        else:
            created_value, hour = timestamp_param(created, dialect), hour_of(created)
    request_id, user_id, model_name = record.request_id, record.user_id, record.model_name
    api_key_id, user_channel_id, channel_id = (
        record.api_key_id, record.user_channel_id, record.channel_id)
    inputs, outputs, cached = u.input, u.output, u.cache_read
    values = [
        _clipped(request_id, _REQUEST_ID), user_id, api_key_id, user_channel_id, channel_id,
        record.model_config_id, _clipped(model_name, _MODEL), _clipped(record.endpoint, _ENDPOINT),
        record.is_stream, inputs, outputs, cached, u.cache_write_5m, u.cache_write_1h,
        u.image_in, u.image_out, u.audio_in, u.audio_out,
        record.response_time_ms, record.first_response_time_ms, base_nanos, group_nanos,
        user_channel_nanos, prices_json, cost_nanos, 0, formula, record.status,
        str(record.error_message or "")[:ERROR_MESSAGE_LIMIT], record.upstream_status,
        _clipped(record.failure_reason, _REASON), record.meta_model_name, _clipped(record.ip, _IP),
        record.user_agent, created_value]
    item = {"request_id": request_id, "user_id": user_id, "api_key_id": api_key_id,
            "cost_nanos": cost_nanos, "delivered": record.delivered, "model_name": model_name,
            "input_tokens": inputs, "output_tokens": outputs, "cached_input_tokens": cached,
            "user_channel_id": user_channel_id, "channel_id": channel_id}
    return PreparedSettlement(item, dialect, values, hour)
