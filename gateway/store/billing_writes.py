"""The SQL of money: loading wallet numbers, and writing one settlement batch in one transaction.

A batch is many requests' settlements (group commit).  It is idempotent so the settler can
retry it after any failure, including a commit whose acknowledgement was lost: requests whose
usage-log row already exists are reported as duplicates (with their recorded charge) and are
not applied again, and ``usage_logs.request_id`` / ``ledger (kind, ref)`` are unique so a
concurrent writer cannot apply one twice either.  Balances and key counters are read under row
locks (``FOR UPDATE`` on PostgreSQL; SQLite's ``BEGIN IMMEDIATE`` already serialises writers),
so the wallet floor at zero and the key-quota re-check see the committed numbers.

Cost on the database thread (issue 22): the batch shares the GIL with the reactor, so its
statements are fixed SQL on the transaction's DB-API cursor (``driver_sql``), one
``executemany`` each, with the usage-log rows already converted on the reactor thread
(``settlement_rows``); Core is used only for the rare parts (subscribers' quotas, referral
commissions).  The same transaction adds the rows it logs to the usage rollups
(``usage_rollups.add_settled``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from decimal import Decimal
from typing import Any

from sqlalchemy import select
from sqlalchemy.engine import Connection
from sqlalchemy.exc import DBAPIError, InterfaceError, OperationalError

from gateway.billing.referral import commission_nanos, commission_rate
from gateway.billing.subscriptions import Quota, split
from gateway.settings.spec import parse_bool
from gateway.store import schema
from gateway.store import settlement_rows as rows
from gateway.store.driver_sql import DriverSQL, timestamp_param
from gateway.store.referrals import record_commissions, referrers_of
from gateway.store.settlement_rows import PreparedSettlement, prepare
from gateway.store.subscriptions import lock_quotas, save_quotas, spendable_quota
from gateway.store.types import utcnow
from gateway.store.usage_rollups import Entry, add_settled, hour_of

INSUFFICIENT_BALANCE = "Insufficient balance"
KEY_QUOTA_EXCEEDED = "API key quota exceeded"
CHARGE = "charge"
REFERRAL = "referral"


def is_transient(exc: BaseException) -> bool:
    """True for failures worth retrying as they are (lost connection, lock, server restart)."""
    if isinstance(exc, (OperationalError, InterfaceError)):
        return True
    return isinstance(exc, DBAPIError) and bool(exc.connection_invalidated)


def load_user_balance(conn: Connection, user_id: int) -> tuple[int, int] | None:
    """(spendable, 0) of a user for the wallet cache, or None when the user does not exist.

    Spendable = wallet balance + what active subscriptions can pay now, so a subscriber with
    an empty wallet is admitted; settlement then draws the quota first.
    """
    u = schema.users
    balance = conn.execute(select(u.c.balance_nanos).where(u.c.id == user_id)).scalar()
    if balance is None:
        return None
    return int(balance) + spendable_quota(conn, user_id, utcnow()), 0


def load_key_quota(conn: Connection, key_id: int) -> tuple[int, int] | None:
    """(quota_limit, spent) of an API key, or None when the key does not exist."""
    k = schema.api_keys
    row = conn.execute(
        select(k.c.quota_limit_nanos, k.c.spent_nanos).where(k.c.id == key_id)).first()
    return None if row is None else (int(row[0]), int(row[1]))


def _existing(sql: DriverSQL, ids: Sequence[str]) -> dict[str, dict[str, Any]]:
    """Outcomes of requests already settled (usage-log row present), by request id."""
    found: dict[str, dict[str, Any]] = {}
    for chunk_start in range(0, len(ids), 400):
        chunk = list(ids[chunk_start:chunk_start + 400])
        marks = sql.marks(len(chunk))
        for request_id, cost, status, error in sql.all(
                "SELECT request_id, cost_nanos, status, error_message FROM usage_logs "
                f"WHERE request_id IN ({marks})", chunk):
            refused = error if status == 402 and error in (
                INSUFFICIENT_BALANCE, KEY_QUOTA_EXCEEDED) else None
            found[request_id] = {"request_id": request_id, "charged_nanos": int(cost),
                                 "balance_after_nanos": None, "spent_after_nanos": None,
                                 "quota_nanos": None, "refused": refused, "duplicate": True}
        if found:
            for ref, after in sql.all(
                    "SELECT ref, balance_after_nanos FROM ledger WHERE kind = ? "
                    f"AND ref IN ({marks})", [CHARGE, *chunk]):
                if ref in found:
                    found[ref]["balance_after_nanos"] = int(after)
    return found


def _locked(sql: DriverSQL, table: str, columns: str, ids: set[int]) -> dict[int, list[int]]:
    """``columns`` of rows ``ids`` of ``table``, row-locked in id order (PostgreSQL)."""
    if not ids:
        return {}
    ordered = sorted(ids)
    rows = sql.all(f"SELECT id, {columns} FROM {table} WHERE id IN ({sql.marks(len(ordered))}) "
                   f"ORDER BY id{sql.for_update()}", ordered)
    return {int(row[0]): [int(v) for v in row[1:]] for row in rows}


def _rate(sql: DriverSQL) -> Decimal:
    """The referral commission rate in force (``referrals.settlement_rate``, as plain SQL)."""
    values = dict(sql.all("SELECT key, value FROM settings WHERE key IN (?, ?)",
                          ["referral_enabled", "referral_commission_rate"]))
    if not parse_bool(values.get("referral_enabled"), False):
        return Decimal(0)
    return commission_rate(values.get("referral_commission_rate"))


def _subscribers(sql: DriverSQL, user_ids: set[int]) -> set[int]:
    """The users among ``user_ids`` with any subscription row (only they need quota locks)."""
    if not user_ids:
        return set()
    ordered = sorted(user_ids)
    return {int(row[0]) for row in sql.all(
        "SELECT DISTINCT user_id FROM user_subscriptions "
        f"WHERE user_id IN ({sql.marks(len(ordered))})", ordered)}


def write_batch(conn: Connection, items: Sequence[Mapping[str, Any] | PreparedSettlement],
                now: datetime) -> list[dict[str, Any]]:
    """Apply settlements in order; one result dict per item (same order).

    Each item: ``request_id``, ``user_id``, ``api_key_id``, ``cost_nanos``, ``delivered``
    (True: the client already has the answer, so charge what is left and floor at zero;
    False: refuse with no charge when the wallet or key quota cannot pay), the token counts
    ``input_tokens``/``output_tokens``/``cached_input_tokens`` etc., and the other
    ``usage_logs`` columns.  ``cost_nanos`` in the usage log becomes the amount charged.

    Subscriptions: the payer's active subscription quotas pay first (``lock_quotas`` order),
    the wallet the rest; the quota part is ``subscription_cost_nanos`` in the usage log and
    only the wallet part is a ``charge`` ledger row.  Referral: when enabled and the payer has
    an inviter, the inviter is credited rate x the wallet part (``referral`` ledger row, ref
    ``referral:<request_id>``) in this same transaction.  For a payer with active
    subscriptions, a result's ``balance_after_nanos`` is what the wallet cache admits against:
    wallet balance + remaining quota (the ledger row keeps the wallet balance alone).
    """
    sql = DriverSQL(conn)
    try:
        prepared = [item.for_dialect(sql.dialect) if isinstance(item, PreparedSettlement)
                    else prepare(item, sql.dialect) for item in items]
        return _write(conn, sql, prepared, now)
    finally:
        sql.close()


class NeedsConnection(Exception):
    """A lean batch (``write_batch_lean``) met a part written through Core (a referral
    commission or a subscriber's quota) before writing anything: run it with a Connection."""


def write_batch_lean(sql: DriverSQL, items: Sequence[PreparedSettlement],
                     now: datetime) -> list[dict[str, Any]]:
    """``write_batch`` on a plain DB-API transaction (``DBRunner.driver_transaction``).

    Why (issue 22, goal 3): on SQLite it skips SQLAlchemy's begin, pool checkout, events and
    commit, ~0.16 ms of Python per batch (of ~0.7 ms for 4 settlements) that the database
    thread ran holding the GIL, while the reactor waited for it.  The rare parts still
    written through Core (referral commissions, subscribers' quotas) raise
    ``NeedsConnection`` before any write; the settler then runs ``write_batch``.
    """
    return _write(None, sql, [item.for_dialect(sql.dialect) for item in items], now)


def _write(conn: Connection | None, sql: DriverSQL, prepared: Sequence[PreparedSettlement],
           now: datetime) -> list[dict[str, Any]]:
    existing = _existing(sql, [p.item["request_id"] for p in prepared])
    fresh = [p for p in prepared if p.item["request_id"] not in existing]
    payers = {p.item["user_id"] for p in fresh}
    rate = _rate(sql) if fresh else Decimal(0)
    if rate and conn is None:
        raise NeedsConnection("referral commissions")
    referrers = referrers_of(conn, payers) if rate and conn is not None else {}
    balances = {uid: vals[0] for uid, vals in _locked(
        sql, "users", "balance_nanos", payers | set(referrers.values())).items()}
    subscribers = _subscribers(sql, payers)
    if subscribers and conn is None:
        raise NeedsConnection("subscription quotas")
    quotas = lock_quotas(conn, subscribers, now) if subscribers and conn is not None else {}
    # quotas this batch spends from (a reset applied but not spent needs no write: the next
    # read applies it again from the same stored numbers)
    touched: dict[int, Quota] = {}
    commissions: list[dict[str, Any]] = []
    keys = _locked(sql, "api_keys", "quota_limit_nanos, spent_nanos",
                   {p.item["api_key_id"] for p in fresh if p.item.get("api_key_id") is not None})
    now_param = timestamp_param(now, sql.dialect)
    now_hour = hour_of(now)
    user_debits: dict[int, int] = {}
    key_updates: dict[int, list[int]] = {}
    ledger_rows: list[tuple[Any, ...]] = []
    log_rows: list[tuple[Any, ...]] = []
    rollup_entries: list[Entry] = []
    results: dict[str, dict[str, Any]] = dict(existing)
    for entry in fresh:
        item = entry.item
        request_id = item["request_id"]
        if request_id in results:  # the same id twice in one batch: the first one counts
            continue
        user_id, key_id = item["user_id"], item.get("api_key_id")
        cost = max(0, int(item["cost_nanos"]))
        balance = balances.get(user_id)
        key = keys.get(key_id) if key_id is not None else None
        subs = quotas.get(user_id, [])
        can_pay = sum(q.balance_nanos for q in subs) + (balance or 0)
        refused: str | None = None
        if balance is None:
            charged = 0
        elif item.get("delivered", True):
            charged = min(cost, can_pay)
        elif cost > can_pay:
            charged, refused = 0, INSUFFICIENT_BALANCE
        elif key is not None and key[0] > 0 and key[1] + cost > key[0]:
            charged, refused = 0, KEY_QUOTA_EXCEEDED
        else:
            charged = cost
        taken, wallet_part = split(charged, subs)
        if taken:
            spent = dict(taken)
            subs = [replace(q, balance_nanos=q.balance_nanos - spent[q.id])
                    if q.id in spent else q for q in subs]
            quotas[user_id] = subs
            touched.update((q.id, q) for q in subs if q.id in spent)
        if balance is not None:
            balance -= wallet_part
            balances[user_id] = balance
            user_debits[user_id] = user_debits.get(user_id, 0) + wallet_part
        if wallet_part and balance is not None:
            ledger_rows.append((user_id, CHARGE, -wallet_part, balance, None, request_id,
                                str(item.get("model_name") or "")[:200], now_param))
        inviter = referrers.get(user_id)
        bonus = commission_nanos(wallet_part, rate) if inviter is not None else 0
        if bonus and inviter is not None and inviter in balances:
            balances[inviter] += bonus
            user_debits[inviter] = user_debits.get(inviter, 0) - bonus
            ledger_rows.append((inviter, REFERRAL, bonus, balances[inviter], None,
                                f"{REFERRAL}:{request_id}",
                                f"referral commission from user {user_id}", now_param))
            commissions.append({
                "referrer_id": inviter, "referred_user_id": user_id,
                "request_id": request_id, "base_cost_nanos": wallet_part,
                "rate_nanos": int(rate * 1_000_000_000), "amount_nanos": bonus,
                "created_at": now})
        inputs = int(item.get("input_tokens") or 0)
        outputs = int(item.get("output_tokens") or 0)
        cached = int(item.get("cached_input_tokens") or 0)
        if key is not None and key_id is not None:
            key[1] += charged
            counters = key_updates.get(key_id)
            if counters is None:
                counters = key_updates[key_id] = [0, 0, 0, 0, 0]
            counters[0] += charged
            counters[1] += 1
            counters[2] += inputs
            counters[3] += outputs
            counters[4] += cached
        values = entry.values.copy()
        values[rows.COST] = charged
        values[rows.SUBSCRIPTION_COST] = charged - wallet_part
        if refused:
            values[rows.STATUS] = 402
            values[rows.ERROR] = refused
        elif charged != cost:
            values[rows.FORMULA] = (f"{values[rows.FORMULA] or ''}; charged {charged} "
                                    "nano-units (wallet floored at 0)").lstrip("; ")
        if values[rows.CREATED] is None:
            values[rows.CREATED] = now_param
        log_rows.append(tuple(values))
        rollup_entries.append((now_hour if entry.hour is None else entry.hour, user_id,
                               item.get("user_channel_id"), item.get("channel_id"),
                               inputs, outputs, cached, charged,
                               values[rows.MODEL] or ""))
        if balance is not None and subs:
            # the wallet cache admits against wallet + quota (see ``load_user_balance``)
            spendable: int | None = balance + sum(q.balance_nanos for q in subs)
        else:
            spendable = balance
        results[request_id] = {
            "request_id": request_id, "charged_nanos": charged, "balance_after_nanos": spendable,
            "spent_after_nanos": key[1] if key is not None else None,
            "quota_nanos": key[0] if key is not None else None, "refused": refused,
            "duplicate": False, "subscription_nanos": charged - wallet_part}
    _apply(sql, user_debits, key_updates, ledger_rows, log_rows, now_param)
    add_settled(sql, rollup_entries)
    if conn is not None:  # a lean batch has neither (it raised NeedsConnection)
        if touched:
            save_quotas(conn, touched.values(), now)
        record_commissions(conn, commissions)
    return [results[p.item["request_id"]] for p in prepared]


_LEDGER_INSERT = ("INSERT INTO ledger (user_id, kind, amount_nanos, balance_after_nanos, "
                  "actor_user_id, ref, memo, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)")
_KEY_UPDATE = ("UPDATE api_keys SET spent_nanos = spent_nanos + ?, "
               "request_count = request_count + ?, input_tokens = input_tokens + ?, "
               "output_tokens = output_tokens + ?, cached_input_tokens = cached_input_tokens + ?, "
               "last_used_at = ? WHERE id = ?")


def _apply(sql: DriverSQL, user_debits: dict[int, int], key_updates: dict[int, list[int]],
           ledger_rows: list[tuple[Any, ...]], log_rows: list[tuple[Any, ...]],
           now_param: Any) -> None:
    """The batch's writes: one ``executemany`` per statement, rows in id order (lock order)."""
    sql.many("UPDATE users SET balance_nanos = balance_nanos - ? WHERE id = ?",
             [(amount, uid) for uid, amount in sorted(user_debits.items()) if amount])
    sql.many(_KEY_UPDATE, [(*counters, now_param, kid)
                           for kid, counters in sorted(key_updates.items())])
    sql.many(_LEDGER_INSERT, ledger_rows)
    sql.many(rows.LOG_INSERT, log_rows)
