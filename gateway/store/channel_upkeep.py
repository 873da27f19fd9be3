"""Health marks that jobs and the admin's test button write on ``channels`` rows.

Three writers outside the request path touch a channel's health columns: the gateway when it
auto-disables a failing channel, the channel probe (health status, and lifting an automatic
disable once a probe succeeds), and the admin's ``Test`` button (health status only).  The
failure counters of the request path are ``channel_health.write_health``.

A probe's recovery is conditional on the row still being enabled and on the very
``auto_disabled_at`` the probe saw, so an admin change racing with a probe wins.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.engine import Connection

from gateway.store import schema

#: what a recovery clears: the failure counters and the automatic disable
RECOVERED: dict[str, Any] = {
    "consecutive_failures": 0,
    "last_failure_at": None,
    "last_failure_reason": "",
    "auto_disabled_at": None,
    "auto_disabled_reason": "",
}
REASON_LIMIT = 500


@dataclass(frozen=True)
class ProbeTarget:
    """An enabled channel to probe: where to send the probe, and the auto-disable it saw."""

    id: int
    base_url: str
    api_key: str | None
    auto_disabled_at: datetime | None


def _status(healthy: bool) -> str:
    return "up" if healthy else "down"


def mark_auto_disabled(conn: Connection, channel_id: int, reason: str, now: datetime) -> None:
    """The gateway gave up on a channel: routing skips it until a probe or an admin lifts it."""
    channels = schema.channels
    conn.execute(update(channels).where(channels.c.id == channel_id).values(
        auto_disabled_at=now, auto_disabled_reason=reason[:REASON_LIMIT], updated_at=now))


def record_test(conn: Connection, channel_id: int, healthy: bool, now: datetime) -> None:
    """The outcome of the admin's test request (nothing else of the row changes)."""
    ch = schema.channels
    conn.execute(update(ch).where(ch.c.id == channel_id).values(
        last_health_checked_at=now, last_health_status=_status(healthy)))


def probe_targets(conn: Connection, every_enabled: bool) -> list[ProbeTarget]:
    """Enabled channels by id: all of them, or (``every_enabled`` false) the auto-disabled."""
    ch = schema.channels
    query = select(ch.c.id, ch.c.base_url, ch.c.api_key, ch.c.auto_disabled_at).where(
        ch.c.enabled.is_(True)).order_by(ch.c.id)
    if not every_enabled:
        query = query.where(ch.c.auto_disabled_at.is_not(None))
    return [ProbeTarget(id=row.id, base_url=row.base_url, api_key=row.api_key,
                        auto_disabled_at=row.auto_disabled_at)
            for row in conn.execute(query)]


def record_probe(conn: Connection, channel: ProbeTarget, healthy: bool, recover: bool,
                 now: datetime) -> bool:
    """Store the probe outcome; clear the auto-disable when ``recover``.  True if recovered."""
    ch = schema.channels
    values: dict[str, Any] = {"last_health_checked_at": now,
                              "last_health_status": _status(healthy)}
    where = [ch.c.id == channel.id, ch.c.enabled.is_(True)]
    if recover:
        values.update(RECOVERED, updated_at=now)
        where.append(ch.c.auto_disabled_at == channel.auto_disabled_at)
    result = conn.execute(update(ch).where(*where).values(**values))
    return recover and result.rowcount == 1
