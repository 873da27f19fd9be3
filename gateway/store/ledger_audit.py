"""Recompute every balance and key quota from the ledger and the usage logs; report differences.

The money rules (DESIGN.md, Money; operations contract §4) say what must always hold, whatever
concurrency, failover, crash or fleet did to the requests:

- a user's balance equals the sum of their ledger rows (a new user starts at zero; every
  change -- charge, refund, top-up, admin change -- is a ledger row);
- each ledger row follows the one before it: ``balance_after = previous balance_after +
  amount`` (a balance written outside the ledger breaks the chain at that point);
- each billed request's wallet part (usage-log ``cost - subscription_cost``) is exactly one
  ``charge`` row of that amount, referenced by the request id, and no charge row lacks its
  usage log (among the logs retention has kept);
- an API key's used quota equals the sum of its usage-log costs, less task refunds.

``audit`` reads everything in one transaction and returns the differences (empty when the
books are right).  ``lockgate-admin verify-ledger`` prints them; the concurrency and failure
tests assert there are none.  The key-quota check assumes no usage log of the key was deleted
(log retention or ``DELETE /api/logs``); the checks on balances and the ledger do not.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import func, select
from sqlalchemy.engine import Connection

from gateway.store import schema

CHARGE = "charge"


@dataclass(frozen=True)
class Difference:
    """One fact the books disagree on: ``subject`` (e.g. ``user 3``) should be ``expected``
    by the recomputation but is ``found`` (nano-units; None when a record is missing)."""

    subject: str
    what: str
    expected: int | None
    found: int | None

    def __str__(self) -> str:
        return (f"{self.subject}: {self.what}: expected {_show(self.expected)}, "
                f"found {_show(self.found)}")


def _show(value: int | None) -> str:
    return "nothing" if value is None else str(value)


def audit(conn: Connection) -> list[Difference]:
    """Every difference between the stored money figures and their recomputation."""
    return [*_balances(conn), *_chains(conn), *_charges(conn), *_key_quotas(conn)]


def _balances(conn: Connection) -> list[Difference]:
    users, ledger = schema.users, schema.ledger
    sums = (select(ledger.c.user_id, func.sum(ledger.c.amount_nanos).label("total"))
            .group_by(ledger.c.user_id).subquery())
    rows = conn.execute(
        select(users.c.id, users.c.balance_nanos, func.coalesce(sums.c.total, 0))
        .select_from(users.outerjoin(sums, sums.c.user_id == users.c.id))
        .order_by(users.c.id))
    return [Difference(f"user {uid}", "balance vs sum of ledger rows", int(total), int(balance))
            for uid, balance, total in rows if int(balance) != int(total)]


def _chains(conn: Connection) -> list[Difference]:
    ledger = schema.ledger
    previous = func.lag(ledger.c.balance_after_nanos).over(
        partition_by=ledger.c.user_id, order_by=ledger.c.id)
    rows = select(ledger.c.id, ledger.c.user_id, ledger.c.amount_nanos,
                  ledger.c.balance_after_nanos, previous.label("previous")).subquery()
    found = []
    for row_id, user_id, amount, after, before in conn.execute(
            select(rows).order_by(rows.c.id)):
        expected = int(before or 0) + int(amount)
        if expected != int(after):
            found.append(Difference(f"user {user_id}", f"ledger row {row_id} balance_after",
                                    expected, int(after)))
    return found


def _charges(conn: Connection) -> list[Difference]:
    logs, ledger = schema.usage_logs, schema.ledger
    charged = dict(conn.execute(
        select(ledger.c.ref, ledger.c.amount_nanos).where(ledger.c.kind == CHARGE)).all())
    found = []
    oldest = None
    for request_id, cost, subscription, created in conn.execute(
            select(logs.c.request_id, logs.c.cost_nanos, logs.c.subscription_cost_nanos,
                   logs.c.created_at).order_by(logs.c.id)):
        oldest = created if oldest is None or created < oldest else oldest
        wallet_part = int(cost) - int(subscription)
        row = charged.pop(request_id, None)
        if wallet_part != (-int(row) if row is not None else 0):
            found.append(Difference(f"request {request_id}", "charge row vs usage-log cost",
                                    -wallet_part if wallet_part else None,
                                    int(row) if row is not None else None))
    if charged and oldest is not None:  # older charges may have lost their log to retention
        kept = set(charged)
        for ref, created in conn.execute(
                select(ledger.c.ref, ledger.c.created_at).where(ledger.c.kind == CHARGE)):
            if ref in kept and created >= oldest:
                found.append(Difference(f"request {ref}", "charge row without a usage log",
                                        None, int(charged[ref])))
    return found


def _key_quotas(conn: Connection) -> list[Difference]:
    keys, logs, tasks = schema.api_keys, schema.usage_logs, schema.tasks
    costs = (select(logs.c.api_key_id, func.sum(logs.c.cost_nanos).label("total"))
             .where(logs.c.api_key_id.is_not(None)).group_by(logs.c.api_key_id).subquery())
    refunds = (select(tasks.c.api_key_id, func.sum(tasks.c.refunded_nanos).label("total"))
               .where(tasks.c.api_key_id.is_not(None)).group_by(tasks.c.api_key_id).subquery())
    rows = conn.execute(
        select(keys.c.id, keys.c.spent_nanos, func.coalesce(costs.c.total, 0),
               func.coalesce(refunds.c.total, 0))
        .select_from(keys.outerjoin(costs, costs.c.api_key_id == keys.c.id)
                     .outerjoin(refunds, refunds.c.api_key_id == keys.c.id))
        .order_by(keys.c.id))
    return [Difference(f"api key {kid}", "used quota vs usage-log costs less refunds",
                       max(0, int(cost) - int(refunded)), int(spent))
            for kid, spent, cost, refunded in rows
            if int(spent) != max(0, int(cost) - int(refunded))]
