"""A settlement's usage-log row, converted once into the exact parameters the driver takes.

Why its own step: the settlement batch runs on the database thread, which shares the GIL with
the reactor.  Everything about a usage-log row that does not depend on the batch's outcome
(clipping, defaults, JSON, timestamps in the database's form, the rollup hour) is done here, on
the reactor thread, a few microseconds per request as each request ends -- so the batch itself
only patches the five outcome columns and hands the tuples to one ``executemany``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import orjson

from gateway.store import schema
from gateway.store.driver_sql import timestamp_param
from gateway.store.usage_rollups import hour_of

#: the usage log keeps the first 512 characters of an error (gateway contract §2)
ERROR_MESSAGE_LIMIT = 512
TEXT_LIMITS = {"request_id": 64, "model_name": 200, "endpoint": 100, "ip": 64,
               "failure_reason": 512}

#: every usage-log column the batch writes, in the order of ``LOG_INSERT``'s VALUES
LOG_COLUMNS = tuple(c.name for c in schema.usage_logs.columns if c.name != "id")
LOG_INSERT = (f"INSERT INTO usage_logs ({', '.join(LOG_COLUMNS)}) "
              f"VALUES ({', '.join('?' for _ in LOG_COLUMNS)})")
COST = LOG_COLUMNS.index("cost_nanos")
SUBSCRIPTION_COST = LOG_COLUMNS.index("subscription_cost_nanos")
STATUS = LOG_COLUMNS.index("status")
ERROR = LOG_COLUMNS.index("error_message")
FORMULA = LOG_COLUMNS.index("pricing_formula")
CREATED = LOG_COLUMNS.index("created_at")
MODEL = LOG_COLUMNS.index("model_name")


def _default(column: Any) -> Any:
    if column.nullable or column.name == "created_at":  # created_at: the batch's time
        return None
    if column.name in ("group_multiplier_nanos", "user_channel_multiplier_nanos"):
        return 1_000_000_000
    if column.name == "is_stream":
        return False
    return "" if column.type.python_type is str else 0


_DEFAULTS = tuple(_default(schema.usage_logs.c[name]) for name in LOG_COLUMNS)
_POSITION = {name: index for index, name in enumerate(LOG_COLUMNS)}
#: the clipped columns' positions and lengths
_CLIPPED = tuple((_POSITION[name], limit) for name, limit in TEXT_LIMITS.items()
                 if name in _POSITION)
PRICES = _POSITION["prices"]


@dataclass(slots=True)
class PreparedSettlement:
    """One batch item: the billing inputs (``item``) and its usage-log row as parameters."""

    item: Mapping[str, Any]
    dialect: str
    #: usage-log values in ``LOG_COLUMNS`` order (``created_at`` None: the batch's time)
    values: list[Any]
    #: the rollup hour of ``created_at`` (None with it)
    hour: int | None

    def for_dialect(self, dialect: str) -> PreparedSettlement:
        """This item converted for ``dialect``: only ``created_at``'s form depends on it
        (SQLite's text or a naive UTC datetime).  Works from ``values``, not ``item`` -- an
        item may hold only the billing inputs (``ledger.settlement_values``)."""
        if dialect == self.dialect:
            return self
        values = self.values.copy()
        created = values[CREATED]
        if isinstance(created, str):
            created = datetime.fromisoformat(created)  # naive UTC (``timestamp_param``)
        if isinstance(created, datetime):
            values[CREATED] = (created.isoformat(" ", "microseconds") if dialect == "sqlite"
                               else created)
        return PreparedSettlement(self.item, dialect, values, self.hour)


def prepare(item: Mapping[str, Any], dialect: str) -> PreparedSettlement:
    """Convert one ``write_batch`` item for ``dialect`` (``sqlite`` or ``postgresql``)."""
    # a column the item leaves out keeps its default; one it gives (None included) is taken
    # (``map`` runs the lookups in C: no Python step per column)
    values = list(map(item.get, LOG_COLUMNS, _DEFAULTS))
    for index, limit in _CLIPPED:
        value = values[index]
        if isinstance(value, str) and len(value) > limit:
            values[index] = value[:limit]
    values[ERROR] = str(values[ERROR] or "")[:ERROR_MESSAGE_LIMIT]
    prices = values[PRICES]
    if prices is not None:
        values[PRICES] = orjson.dumps(prices, option=orjson.OPT_SORT_KEYS).decode()
    created = item.get("created_at")
    hour = None
    if created is not None:
        values[CREATED] = timestamp_param(created, dialect)
        hour = hour_of(created)
    return PreparedSettlement(item, dialect, values, hour)
