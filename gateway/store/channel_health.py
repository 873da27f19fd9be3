"""SQL of channel health: the failure counts and last failure reason on ``channels``.

Counts are applied as increments so that several processes recording failures of one channel
add up (operations contract §4: channel health is shared); a success sets the count to zero.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import update
from sqlalchemy.engine import Connection

from gateway.store import schema

REASON_LIMIT = 500


@dataclass(frozen=True)
class HealthChange:
    """What happened to one channel since the last write: when ``reset``, a success (the count
    starts again from zero), then ``failures`` new failures, the last one at ``failed_at``."""

    reset: bool = False
    failures: int = 0
    reason: str = ""
    failed_at: datetime | None = None

    def then_failed(self, reason: str, at: datetime) -> HealthChange:
        return HealthChange(self.reset, self.failures + 1, reason, at)

    def then_recovered(self) -> HealthChange:
        return HealthChange(reset=True)


def write_health(conn: Connection, changes: Mapping[int, HealthChange]) -> None:
    channels = schema.channels
    for channel_id, change in changes.items():
        where = update(channels).where(channels.c.id == channel_id)
        count = (change.failures if change.reset
                 else channels.c.consecutive_failures + change.failures)
        if change.failures:
            conn.execute(where.values(consecutive_failures=count,
                                      last_failure_at=change.failed_at,
                                      last_failure_reason=change.reason[:REASON_LIMIT]))
        elif change.reset:
            conn.execute(where.values(consecutive_failures=0))
