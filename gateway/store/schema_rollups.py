"""Usage rollups: the usage log summed per hour, kept by the settlement batch itself.

Why: the console's stats and channel-usage reads would otherwise aggregate every usage-log row
per call (seconds at millions of rows).  Each table holds one row per (hour, dimension) with
the sums of the usage-log rows of that hour; ``gateway.store.usage_rollups`` adds to them in
the settlement transaction, so they are exact to the nano-unit at every commit.

``hour`` is whole hours since the Unix epoch (UTC), ``day`` whole UTC days (``hour // 24``), the
same integers on every database.  The per-channel sums are kept per day too, so an all-time
or month-long read sums a few thousand rows, not every hour.  A usage row without a user
channel or channel counts under id 0 (a primary key cannot hold NULL).
"""

from __future__ import annotations

from sqlalchemy import BigInteger, Column, Integer, PrimaryKeyConstraint, String, Table

from gateway.store.schema_base import ZERO, metadata

#: the summed usage-log columns, in the order every rollup row carries them
ROLLUP_MEASURES = ("requests", "input_tokens", "output_tokens", "cached_input_tokens",
                   "cost_nanos")


def _measures() -> list[Column]:
    return [Column(name, BigInteger, nullable=False, server_default=ZERO)
            for name in ROLLUP_MEASURES]


# per user per hour: /api/user/stats (and the user's trend)
usage_rollup_user_hours = Table(
    "usage_rollup_user_hours", metadata,
    Column("user_id", Integer, nullable=False),
    Column("hour", Integer, nullable=False),
    *_measures(),
    PrimaryKeyConstraint("user_id", "hour"),
)

# per (user channel, channel) per hour: /api/channel-usage, and /api/stats summed over all
usage_rollup_channel_hours = Table(
    "usage_rollup_channel_hours", metadata,
    Column("hour", Integer, nullable=False),
    Column("user_channel_id", Integer, nullable=False),
    Column("channel_id", Integer, nullable=False),
    *_measures(),
    PrimaryKeyConstraint("hour", "user_channel_id", "channel_id"),
)

# the same per (user channel, channel), per UTC day: long ranges read this one
usage_rollup_channel_days = Table(
    "usage_rollup_channel_days", metadata,
    Column("day", Integer, nullable=False),
    Column("user_channel_id", Integer, nullable=False),
    Column("channel_id", Integer, nullable=False),
    *_measures(),
    PrimaryKeyConstraint("day", "user_channel_id", "channel_id"),
)

# per logged model name per hour: the model filter's names and its page totals
usage_rollup_model_hours = Table(
    "usage_rollup_model_hours", metadata,
    Column("model_name", String(200), nullable=False),
    Column("hour", Integer, nullable=False),
    *_measures(),
    PrimaryKeyConstraint("model_name", "hour"),
)
