"""The operations record of a studio (agents contract §4.2-§4.4, §4.7, §4.8, [P-31]).

One record per ``(owner, studio)``.  ``context`` applies the §4.2 rules every route shares;
the first panel read creates the default record (``ensure_default``), ``bootstrap`` creates one
from a body and refuses when one exists.  State changes and configuration are audited in the
same transaction.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.engine import Connection

from gateway.store import schema
from gateway.store.assistant.refused import conflict, invalid, missing
from gateway.store.studio import audit, charters, signals
from gateway.store.studio.rows import CompanyRow, StudioRow, row_of
from gateway.store.studio.studios import find_studio

TABLE = schema.studio_companies
STUDIO_REQUIRED = "studio_id is required"
STUDIO_NOT_FOUND = "Agent Studio not found"
NOT_BOOTSTRAPPED = "Personal Company has not been bootstrapped"
ALREADY = "Personal Company is already bootstrapped"
MAX_NAME = 160
MAX_TIMEZONE = 80


@dataclass(frozen=True)
class Context:
    studio: StudioRow
    company: CompanyRow | None

    @property
    def record(self) -> CompanyRow:
        assert self.company is not None
        return self.company


def find_company(conn: Connection, user_id: int, studio_id: str) -> CompanyRow | None:
    found = conn.execute(select(TABLE).where(TABLE.c.owner_user_id == user_id,
                                             TABLE.c.agent_group_id == studio_id)
                         ).mappings().first()
    return row_of(CompanyRow, found) if found is not None else None


def get(conn: Connection, company_id: int) -> CompanyRow:
    return row_of(CompanyRow, conn.execute(select(TABLE).where(TABLE.c.id == company_id))
                  .mappings().one())


def context(conn: Connection, user_id: int, studio_id: str, *, bootstrapped: bool = True
            ) -> Context:
    """§4.2: the studio (400/404) and, when ``bootstrapped``, its record (404)."""
    studio_id = studio_id.strip()
    if not studio_id:
        raise invalid(STUDIO_REQUIRED)
    studio = find_studio(conn, user_id, studio_id)
    if studio is None:
        raise missing(STUDIO_NOT_FOUND)
    company = find_company(conn, user_id, studio_id)
    if bootstrapped and company is None:
        raise missing(NOT_BOOTSTRAPPED)
    return Context(studio, company)


def _insert(conn: Connection, user_id: int, studio: StudioRow, values: dict[str, Any],
            now: datetime) -> int:
    key = conn.execute(TABLE.insert().values(
        owner_user_id=user_id, agent_group_id=studio.id, created_at=now, updated_at=now,
        **values)).inserted_primary_key
    assert key is not None
    return int(key[0])


def ensure_default(conn: Connection, user_id: int, studio: StudioRow, now: datetime
                   ) -> CompanyRow:
    """The studio's record, created with defaults, charter revision 1 and audit
    ``company.default_enabled`` on first use (§4.4).  Two first reads racing each other (two
    tabs, two nodes) create one record: the loser's insert does nothing and it reads the
    winner's."""
    company = find_company(conn, user_id, studio.id)
    if company is not None:
        return company
    insert = pg_insert if conn.dialect.name == "postgresql" else sqlite_insert
    created = conn.execute(insert(TABLE).values(
        owner_user_id=user_id, agent_group_id=studio.id, name=studio.name[:MAX_NAME],
        state="operating", created_at=now, updated_at=now
    ).on_conflict_do_nothing().returning(TABLE.c.id)).first()
    if created is None:
        found = find_company(conn, user_id, studio.id)
        assert found is not None
        return found
    company_id = int(created[0])
    charters.add_revision(conn, company_id, user_id, now, mission=charters.DEFAULT_MISSION)
    audit.record(conn, company_id, "company.default_enabled", now, actor_type="system")
    return get(conn, company_id)


def bootstrap(conn: Connection, user_id: int, studio: StudioRow, values: dict[str, Any],
              charter: dict[str, str], now: datetime) -> CompanyRow:
    """``POST /bootstrap``: the record from a body (state ``bootstrap`` inside the transaction,
    ``operating`` when it commits), charter revision 1, audit ``company.bootstrapped``."""
    if find_company(conn, user_id, studio.id) is not None:
        raise conflict(ALREADY)
    company_id = _insert(conn, user_id, studio, {**values, "state": "bootstrap"}, now)
    charters.add_revision(conn, company_id, user_id, now, **charter)
    conn.execute(update(TABLE).where(TABLE.c.id == company_id).values(state="operating"))
    audit.record(conn, company_id, "company.bootstrapped", now, actor_id=str(user_id))
    return get(conn, company_id)


def update_settings(conn: Connection, company: CompanyRow, user_id: int, values: dict[str, Any],
                    now: datetime) -> CompanyRow:
    """[P-31] ``PUT /settings``: any of name, timezone, budgets, floor, autonomy."""
    if values:
        conn.execute(update(TABLE).where(TABLE.c.id == company.id)
                     .values(**values, updated_at=now))
    audit.record(conn, company.id, "company.settings_updated", now, actor_id=str(user_id),
                 payload={"fields": sorted(values)})
    return get(conn, company.id)


def set_state(conn: Connection, company: CompanyRow, user_id: int, state: str, now: datetime
              ) -> None:
    """Pause (``paused``, ``paused_at=now``) or resume (``operating``, cleared), with the
    internal signal and audit ``company.<state>`` (§4.4)."""
    conn.execute(update(TABLE).where(TABLE.c.id == company.id).values(
        state=state, paused_at=now if state == "paused" else None, updated_at=now))
    signals.add(conn, company.id, f"company.{state}", now, payload={"by": user_id})
    audit.record(conn, company.id, f"company.{state}", now, actor_id=str(user_id))


def set_runtime(conn: Connection, company: CompanyRow, user_id: int, values: dict[str, Any],
                now: datetime) -> CompanyRow:
    """§4.7: replace all four runtime values, audit ``studio.runtime_configured``."""
    conn.execute(update(TABLE).where(TABLE.c.id == company.id).values(**values, updated_at=now))
    audit.record(conn, company.id, "studio.runtime_configured", now, actor_id=str(user_id),
                 payload={"connector_device_id": values["connector_device_id"],
                          "cloud_sandbox_id": values["cloud_sandbox_id"]})
    return get(conn, company.id)


def set_scheduler(conn: Connection, company: CompanyRow, user_id: int, slots: int,
                  now: datetime) -> None:
    conn.execute(update(TABLE).where(TABLE.c.id == company.id)
                 .values(max_concurrent_tasks=slots, updated_at=now))
    audit.record(conn, company.id, "studio.scheduler_configured", now, actor_id=str(user_id),
                 payload={"max_concurrent_tasks": slots})
