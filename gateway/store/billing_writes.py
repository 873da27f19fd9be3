"""The SQL of money: loading wallet numbers, and writing one settlement batch in one transaction.

A batch is many requests' settlements (group commit).  It is idempotent so the settler can
retry it after any failure, including a commit whose acknowledgement was lost: requests whose
usage-log row already exists are reported as duplicates (with their recorded charge) and are
not applied again, and ``usage_logs.request_id`` / ``ledger (kind, ref)`` are unique so a
concurrent writer cannot apply one twice either.  Balances and key counters are read under row
locks (``FOR UPDATE`` on PostgreSQL; SQLite's ``BEGIN IMMEDIATE`` already serialises writers),
so the wallet floor at zero and the key-quota re-check see the committed numbers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from decimal import Decimal
from typing import Any

from sqlalchemy import bindparam, select, update
from sqlalchemy.engine import Connection
from sqlalchemy.exc import DBAPIError, InterfaceError, OperationalError

from gateway.billing.referral import commission_nanos
from gateway.billing.subscriptions import Quota, split
from gateway.store import schema
from gateway.store.referrals import record_commissions, referrers_of, settlement_rate
from gateway.store.subscriptions import lock_quotas, save_quotas, spendable_quota
from gateway.store.types import utcnow

INSUFFICIENT_BALANCE = "Insufficient balance"
KEY_QUOTA_EXCEEDED = "API key quota exceeded"
CHARGE = "charge"
REFERRAL = "referral"
#: the usage log keeps the first 512 characters of an error (gateway contract §2)
ERROR_MESSAGE_LIMIT = 512
_LIMITS = {"request_id": 64, "model_name": 200, "endpoint": 100, "ip": 64,
           "failure_reason": 512}


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


def _clip(row: dict[str, Any]) -> dict[str, Any]:
    for name, limit in _LIMITS.items():
        if isinstance(row.get(name), str):
            row[name] = row[name][:limit]
    row["error_message"] = str(row.get("error_message") or "")[:ERROR_MESSAGE_LIMIT]
    return row


def _existing(conn: Connection, ids: Sequence[str]) -> dict[str, dict[str, Any]]:
    """Outcomes of requests already settled (usage-log row present), by request id."""
    logs = schema.usage_logs
    led = schema.ledger
    found: dict[str, dict[str, Any]] = {}
    for chunk_start in range(0, len(ids), 400):
        chunk = list(ids[chunk_start:chunk_start + 400])
        for request_id, cost, status, error in conn.execute(
                select(logs.c.request_id, logs.c.cost_nanos, logs.c.status,
                       logs.c.error_message).where(logs.c.request_id.in_(chunk))):
            refused = error if status == 402 and error in (
                INSUFFICIENT_BALANCE, KEY_QUOTA_EXCEEDED) else None
            found[request_id] = {"request_id": request_id, "charged_nanos": int(cost),
                                 "balance_after_nanos": None, "spent_after_nanos": None,
                                 "quota_nanos": None, "refused": refused, "duplicate": True}
        if found:
            for ref, after in conn.execute(
                    select(led.c.ref, led.c.balance_after_nanos).where(
                        led.c.kind == CHARGE, led.c.ref.in_(chunk))):
                if ref in found:
                    found[ref]["balance_after_nanos"] = int(after)
    return found


def _locked(conn: Connection, table: Any, columns: Sequence[Any],
            ids: set[int]) -> dict[int, list[int]]:
    if not ids:
        return {}
    query = (select(table.c.id, *columns).where(table.c.id.in_(sorted(ids)))
             .order_by(table.c.id).with_for_update())
    return {int(row[0]): [int(v) for v in row[1:]] for row in conn.execute(query)}


def write_batch(conn: Connection, items: Sequence[Mapping[str, Any]],
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
    existing = _existing(conn, [item["request_id"] for item in items])
    fresh = [item for item in items if item["request_id"] not in existing]
    payers = {item["user_id"] for item in fresh}
    rate = settlement_rate(conn) if fresh else Decimal(0)
    referrers = referrers_of(conn, payers) if rate else {}
    balances = {uid: vals[0] for uid, vals in _locked(
        conn, schema.users, [schema.users.c.balance_nanos],
        payers | set(referrers.values())).items()}
    quotas = lock_quotas(conn, payers, now)
    # quotas this batch spends from (a reset applied but not spent needs no write: the next
    # read applies it again from the same stored numbers)
    touched: dict[int, Quota] = {}
    commissions: list[dict[str, Any]] = []
    keys = _locked(conn, schema.api_keys,
                   [schema.api_keys.c.quota_limit_nanos, schema.api_keys.c.spent_nanos],
                   {item["api_key_id"] for item in fresh if item.get("api_key_id") is not None})
    user_debits: dict[int, int] = {}
    key_updates: dict[int, dict[str, Any]] = {}
    ledger_rows: list[dict[str, Any]] = []
    log_rows: list[dict[str, Any]] = []
    results: dict[str, dict[str, Any]] = dict(existing)
    for item in fresh:
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
            ledger_rows.append({
                "user_id": user_id, "kind": CHARGE, "amount_nanos": -wallet_part,
                "balance_after_nanos": balance, "actor_user_id": None, "ref": request_id,
                "memo": str(item.get("model_name") or "")[:200], "created_at": now})
        inviter = referrers.get(user_id)
        bonus = commission_nanos(wallet_part, rate) if inviter is not None else 0
        if bonus and inviter is not None and inviter in balances:
            balances[inviter] += bonus
            user_debits[inviter] = user_debits.get(inviter, 0) - bonus
            ledger_rows.append({
                "user_id": inviter, "kind": REFERRAL, "amount_nanos": bonus,
                "balance_after_nanos": balances[inviter], "actor_user_id": None,
                "ref": f"{REFERRAL}:{request_id}", "memo": f"referral commission from user "
                f"{user_id}", "created_at": now})
            commissions.append({
                "referrer_id": inviter, "referred_user_id": user_id,
                "request_id": request_id, "base_cost_nanos": wallet_part,
                "rate_nanos": int(rate * 1_000_000_000), "amount_nanos": bonus,
                "created_at": now})
        if key is not None:
            key[1] += charged
            counters = key_updates.setdefault(key_id, {  # type: ignore[arg-type]
                "kid": key_id, "spent": 0, "requests": 0, "input": 0, "output": 0, "cached": 0})
            counters["spent"] += charged
            counters["requests"] += 1
            counters["input"] += int(item.get("input_tokens") or 0)
            counters["output"] += int(item.get("output_tokens") or 0)
            counters["cached"] += int(item.get("cached_input_tokens") or 0)
        log = {name: value for name, value in item.items() if name in _LOG_COLUMNS}
        log["cost_nanos"] = charged
        log["subscription_cost_nanos"] = charged - wallet_part
        log.setdefault("created_at", now)
        if refused:
            log["status"] = 402
            log["error_message"] = refused
        elif charged != cost:
            log["pricing_formula"] = (f"{log.get('pricing_formula') or ''}; charged {charged} "
                                      "nano-units (wallet floored at 0)").lstrip("; ")
        log_rows.append(_clip(log))
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
    _apply(conn, user_debits, key_updates, ledger_rows, log_rows, now)
    save_quotas(conn, touched.values(), now)
    record_commissions(conn, commissions)
    return [results[item["request_id"]] for item in items]


_LOG_COLUMNS = frozenset(c.name for c in schema.usage_logs.columns) - {"id"}


def _apply(conn: Connection, user_debits: dict[int, int], key_updates: dict[int, dict[str, Any]],
           ledger_rows: list[dict[str, Any]], log_rows: list[dict[str, Any]],
           now: datetime) -> None:
    u, k = schema.users, schema.api_keys
    debits = [{"uid": uid, "debit": amount} for uid, amount in user_debits.items() if amount]
    if debits:
        conn.execute(update(u).where(u.c.id == bindparam("uid"))
                     .values(balance_nanos=u.c.balance_nanos - bindparam("debit")), debits)
    if key_updates:
        conn.execute(
            update(k).where(k.c.id == bindparam("kid")).values(
                spent_nanos=k.c.spent_nanos + bindparam("spent"),
                request_count=k.c.request_count + bindparam("requests"),
                input_tokens=k.c.input_tokens + bindparam("input"),
                output_tokens=k.c.output_tokens + bindparam("output"),
                cached_input_tokens=k.c.cached_input_tokens + bindparam("cached"),
                last_used_at=now),
            list(key_updates.values()))
    if ledger_rows:
        conn.execute(schema.ledger.insert(), ledger_rows)
    if log_rows:
        # executemany needs the same keys in every row (rows built by the settler already are)
        names = set().union(*log_rows)
        columns = schema.usage_logs.columns
        defaults = {name: _default(columns[name]) for name in names}
        rows = [row if len(row) == len(names) else {n: row.get(n, defaults[n]) for n in names}
                for row in log_rows]
        conn.execute(schema.usage_logs.insert(), rows)


def _default(column: Any) -> Any:
    if column.nullable:
        return None
    if column.name in ("group_multiplier_nanos", "user_channel_multiplier_nanos"):
        return 1_000_000_000
    if column.name == "is_stream":
        return False
    return "" if column.type.python_type is str else 0
