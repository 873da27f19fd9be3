"""The usage-log query string and record shape shared by ``/api/logs`` and ``/api/user/logs``.

Console contract §1.4 / §4.4 / §5.2: ``page`` / ``page_size`` (bad or <= 0 -> default, size
clamped to 100), id filters, ``model``/``model_name`` (case-insensitive substring), time bounds
``from``/``start_time``/``start_date`` and ``to``/``end_time``/``end_date`` in the accepted
formats (a bare date as an end bound means through that whole day).  Lists are dual-mode: the
paginated envelope only when some filter or page parameter is given, otherwise a plain array of
the 100 newest rows.  A malformed id or time is a 400 and nothing is read.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from twisted.web.iweb import IRequest

from console.http import bad_request
from console.user_view import timestamp
from console.validation import optional_id, page_value
from gateway.billing.money import format_nanos
from gateway.store.schema import USAGE_TOKEN_FIELDS
from gateway.store.usage_queries import LogFilter, list_logs

DEFAULT_PAGE_SIZE = 20
MAX_PAGE_SIZE = 100
PLAIN_LIMIT = 100
#: parameters whose presence switches a list to the paginated envelope (contract §1.4)
ENVELOPE_PARAMS = ("page", "page_size", "start_time", "end_time", "start_date", "end_date",
                   "api_key_id", "model_name", "user_channel_id", "channel_id", "model",
                   "from", "to")
ADMIN_ENVELOPE_PARAMS = (*ENVELOPE_PARAMS, "user_id")
PRICE_FIELDS = ("input_price", "output_price", "cached_input_price", "cache_write_input_price",
                "cache_write_1h_input_price")

_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_LOCAL = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2})?$")
_RFC3339 = re.compile(
    r"^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d{1,9})?([Zz]|[+-]\d{2}:\d{2})$")


def query_value(request: IRequest, *names: str) -> str | None:
    """The first non-empty value among ``names`` in the query string."""
    for name in names:
        values = request.args.get(name.encode())
        if values:
            text = values[0].decode("utf-8", "replace").strip()
            if text:
                return text
    return None


def _id(request: IRequest, name: str) -> int | None:
    return optional_id(query_value(request, name), name)


def parse_time(text: str, *, end: bool) -> datetime:
    """One time bound as an aware UTC datetime; a bare date as an end bound is the next
    midnight (exclusive), other end bounds are inclusive (returned one microsecond later)."""
    try:
        if _DATE.match(text):
            moment = datetime.fromisoformat(text).astimezone()
            return (moment + timedelta(days=1) if end else moment).astimezone(UTC)
        if _LOCAL.match(text):
            moment = datetime.fromisoformat(text).astimezone()
        elif _RFC3339.match(text):
            moment = _parse_rfc3339(text)
        else:
            raise ValueError(text)
    except ValueError:
        raise bad_request("invalid time format", field="to" if end else "from") from None
    moment = moment.astimezone(UTC)
    return moment + timedelta(microseconds=1) if end else moment


def _parse_rfc3339(text: str) -> datetime:
    normal = text.replace("t", "T").replace(" ", "T").replace("z", "Z")
    match = re.match(r"^(.*?:\d{2})(\.\d+)?(Z|[+-]\d{2}:\d{2})$", normal)
    if match is None:
        raise ValueError(text)
    head, fraction, zone = match.groups()
    micros = (fraction or ".0")[1:7].ljust(6, "0")
    return datetime.fromisoformat(f"{head}.{micros}{'+00:00' if zone == 'Z' else zone}")


@dataclass(frozen=True)
class LogQuery:
    filter: LogFilter
    page: int
    page_size: int
    envelope: bool
    #: the admin's view adds what the upstream answered (``upstream_status``,
    #: ``failure_reason``); a user never sees another party's channel details
    admin: bool = False


def parse_log_query(request: IRequest, *, user_id: int | None = None,
                    admin: bool = False) -> LogQuery:
    """Read the query string; ``user_id`` scopes a user's own logs, ``admin`` allows the
    ``user_id`` filter."""
    start_text = query_value(request, "from", "start_time", "start_date")
    end_text = query_value(request, "to", "end_time", "end_date")
    flt = LogFilter(
        user_id=user_id if not admin else _id(request, "user_id"),
        api_key_id=_id(request, "api_key_id"),
        user_channel_id=_id(request, "user_channel_id"),
        channel_id=_id(request, "channel_id"),
        model=query_value(request, "model", "model_name"),
        start=parse_time(start_text, end=False) if start_text else None,
        end=parse_time(end_text, end=True) if end_text else None,
    )
    names = ADMIN_ENVELOPE_PARAMS if admin else ENVELOPE_PARAMS
    envelope = any(query_value(request, name) is not None for name in names)
    page_size = min(page_value(query_value(request, "page_size"), DEFAULT_PAGE_SIZE, "page_size"),
                    MAX_PAGE_SIZE)
    return LogQuery(flt, page_value(query_value(request, "page"), 1, "page"), page_size, envelope,
                    admin)


async def answer(ctx: Any, query: LogQuery) -> Any:
    """Run the query and shape the answer (envelope or plain array)."""
    if not query.envelope:
        result = await ctx.db.transaction(list_logs, query.filter, limit=PLAIN_LIMIT,
                                          with_total=False)
        return [log_view(row, admin=query.admin) for row in result["items"]]
    offset = (query.page - 1) * query.page_size
    result = await ctx.db.transaction(list_logs, query.filter, limit=query.page_size,
                                      offset=offset)
    return {"items": [log_view(row, admin=query.admin) for row in result["items"]],
            "total": result["total"],
            "page": query.page, "page_size": query.page_size}


def log_view(row: dict[str, Any], *, admin: bool = False) -> dict[str, Any]:
    """One usage-log record (contract §4.4); money as decimal strings.  The admin's view adds
    ``upstream_status`` (null when no upstream answered) and ``failure_reason`` (issue 14)."""
    prices = row.get("prices") or {}
    view: dict[str, Any] = {
        "id": row["id"],
        "request_id": row["request_id"],
        "user_id": row["user_id"],
        "api_key_id": row["api_key_id"],
        "user_channel_id": row["user_channel_id"],
        "channel_id": row["channel_id"],
        "model_config_id": row["model_config_id"],
        "model_name": row["model_name"],
        "meta_model_name": row.get("meta_model_name") or "",
        "endpoint": row["endpoint"],
        "is_stream": bool(row["is_stream"]),
    }
    for name in USAGE_TOKEN_FIELDS:
        view[name] = row[name]
    view["response_time_ms"] = row["response_time_ms"]
    view["first_response_time_ms"] = row["first_response_time_ms"]
    view["base_cost"] = format_nanos(row["base_cost_nanos"])
    view["group_multiplier"] = format_nanos(row["group_multiplier_nanos"])
    view["user_channel_multiplier"] = format_nanos(row["user_channel_multiplier_nanos"])
    for name in PRICE_FIELDS:
        view[name] = str(prices.get(name, "0")) if isinstance(prices, dict) else "0"
    view["cost"] = format_nanos(row["cost_nanos"])
    view["subscription_cost"] = format_nanos(row["subscription_cost_nanos"])
    view["pricing_formula"] = row["pricing_formula"]
    view["status"] = row["status"]
    if row["error_message"]:
        view["error_message"] = row["error_message"]
    if admin:
        view["upstream_status"] = row.get("upstream_status")
        view["failure_reason"] = row.get("failure_reason") or ""
    view["ip"] = row["ip"]
    view["user_agent"] = row["user_agent"]
    view["created_at"] = timestamp(row["created_at"])
    return view
