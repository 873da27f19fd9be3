"""Admission control for money: in-memory reservations against cached balances and key quotas.

Why in memory: the hot path must not wait on a database round trip to admit a call (DESIGN,
"The /v1 path").  This node holds every reservation it made; the database stays the durable
ledger and is only written at settlement (``settlement.py``).  Nothing is deducted in the
database before settlement, so a crash loses reservations but never money: after a restart
there is nothing to reconcile -- balances are reloaded from the ledger-backed columns.

Atomicity: Twisted runs this code on one reactor thread, and ``_admit`` checks and adds with no
``await`` in between, so concurrent requests cannot both pass a check that only one fits.
Numbers are loaded on first use (one shared load per account however many callers wait) and
kept current by the settler, which installs the committed balance / spent counter after each
batch.  ``forget_user`` / ``forget_key`` drop the cached numbers after an outside change
(admin edit, top-up, quota reset) but keep reservations and not-yet-committed debits, which
live in separate counters.  Each forget bumps an epoch, so a load or a batch result that
started before the forget can never reinstall a number read before the change.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from twisted.internet.defer import Deferred, ensureDeferred, fail, gatherResults, succeed
from twisted.python.failure import Failure

from gateway.store.billing_writes import (
    INSUFFICIENT_BALANCE,
    KEY_QUOTA_EXCEEDED,
    load_key_quota,
    load_user_balance,
)
from gateway.store.pool import DBRunner


class PaymentRequired(Exception):
    """A 402 refusal at admission; ``message`` is the contract's error text."""

    status = 402
    message = ""

    def __init__(self) -> None:
        super().__init__(self.message)


class InsufficientBalance(PaymentRequired):
    message = INSUFFICIENT_BALANCE


class KeyQuotaExceeded(PaymentRequired):
    message = KEY_QUOTA_EXCEEDED


class WalletUnavailable(Exception):
    """The shared wallet could not be asked (Redis down or too slow): refuse, do not guess."""


@dataclass(eq=False)
class Reservation:
    """Money set aside for one in-flight request on this node."""

    request_id: str
    user_id: int
    key_id: int | None
    amount_nanos: int
    held: bool = True


class _Account:
    """Cached (limit, used) of a user (balance, 0) or a key (quota, spent) plus in-flight sums."""

    __slots__ = ("epoch", "limit", "loading", "pending", "reserved", "used", "waiters")

    def __init__(self) -> None:
        self.limit: int | None = None  # None = not loaded
        self.used = 0
        self.reserved = 0
        self.pending = 0
        self.epoch = 0
        self.loading = False
        self.waiters: list[Deferred[None]] = []


def _account(accounts: dict[int, _Account], account_id: int) -> _Account:
    """``accounts[account_id]``, created on first use (``setdefault`` would build an
    ``_Account`` on every request only to drop it)."""
    account = accounts.get(account_id)
    if account is None:
        account = accounts[account_id] = _Account()
    return account


@dataclass
class SettlingToken:
    """Links a queued settlement to the accounts it debits (see ``Wallets.settling``)."""

    user_id: int
    key_id: int | None
    cost_nanos: int
    user_epoch: int
    key_epoch: int
    #: the shared wallet's name for the queued debit ("" in memory)
    ref: str = ""


class WalletBook(Protocol):
    """What admission and settlement need of a wallet: ``Wallets`` (one process, memory) or
    ``shared_wallet.SharedWallets`` (several processes, Redis)."""

    def reserve(self, request_id: str, user_id: int, key_id: int | None, amount_nanos: int,
                *, jwt: bool = False) -> Deferred[Reservation]: ...

    def release(self, reservation: Reservation) -> None: ...

    def settling(self, reservation: Reservation | None, user_id: int, key_id: int | None,
                 cost_nanos: int) -> SettlingToken: ...

    def settled(self, token: SettlingToken, balance_after: int | None = None,
                spent_after: int | None = None, quota: int | None = None, *,
                charged_nanos: int | None = None) -> None: ...

    def forget_user(self, user_id: int) -> None: ...

    def forget_key(self, key_id: int) -> None: ...

    def forget_all_keys(self) -> None: ...

    def forget_all_users(self) -> None: ...

    @property
    def open_reservations(self) -> int:
        """Reservations this process holds now (a metrics gauge)."""

    def stop(self) -> Deferred[None]:
        """On shutdown, after the last settlement: fires once nothing is left to tell."""


class Wallets:
    """Per-node reservations; ``reserve`` / ``release`` for requests, the rest for the settler."""

    def __init__(self, db: DBRunner) -> None:
        self.db = db
        self._users: dict[int, _Account] = {}
        self._keys: dict[int, _Account] = {}
        self._held: dict[str, Reservation] = {}

    @property
    def open_reservations(self) -> int:
        return len(self._held)

    # --- requests ---------------------------------------------------------------------------

    def reserve(self, request_id: str, user_id: int, key_id: int | None, amount_nanos: int,
                *, jwt: bool = False) -> Deferred[Reservation]:
        """Hold ``amount_nanos`` for a request, or fail with a ``PaymentRequired`` (402).

        JWT callers (no API key) are checked against the wallet only.
        """
        try:
            held = self.reserve_now(request_id, user_id, key_id, amount_nanos, jwt=jwt)
        except (ValueError, PaymentRequired):
            return fail()
        if held is not None:
            return succeed(held)
        return ensureDeferred(self._reserve_after_load(
            request_id, user_id, None if jwt else key_id, amount_nanos))

    def reserve_now(self, request_id: str, user_id: int, key_id: int | None,
                    amount_nanos: int, *, jwt: bool = False) -> Reservation | None:
        """``reserve`` without a Deferred while the balances it needs are in memory (the
        /v1 path's common case): the reservation, ``PaymentRequired`` raised, or None when
        a balance must be loaded first -- then ``reserve`` does that."""
        if request_id in self._held:
            raise ValueError(f"request {request_id!r} already holds a reservation")
        key_id = None if jwt else key_id
        user = _account(self._users, user_id)
        key = _account(self._keys, key_id) if key_id is not None else None
        if user.limit is not None and (key is None or key.limit is not None):
            return self._admit(request_id, user_id, key_id, amount_nanos)
        return None

    async def _reserve_after_load(self, request_id: str, user_id: int, key_id: int | None,
                                  amount_nanos: int) -> Reservation:
        while True:
            waits = [d for d in (
                self._ensure(self._users[user_id], load_user_balance, user_id),
                self._ensure(self._keys[key_id], load_key_quota, key_id)
                if key_id is not None else None) if d is not None]
            if not waits:
                break
            await gatherResults(waits, consumeErrors=True)
        if request_id in self._held:
            raise ValueError(f"request {request_id!r} already holds a reservation")
        return self._admit(request_id, user_id, key_id, amount_nanos)

    def _admit(self, request_id: str, user_id: int, key_id: int | None,
               amount: int) -> Reservation:
        # Synchronous on purpose: the check and the add below are one atomic step.
        amount = max(0, amount)
        user = self._users[user_id]
        assert user.limit is not None
        if user.limit - user.reserved - user.pending < amount:
            raise InsufficientBalance()
        key = self._keys[key_id] if key_id is not None else None
        if key is not None:
            assert key.limit is not None
            if key.limit > 0 and key.used + key.reserved + key.pending + amount > key.limit:
                raise KeyQuotaExceeded()
            key.reserved += amount
        user.reserved += amount
        reservation = Reservation(request_id, user_id, key_id, amount)
        self._held[request_id] = reservation
        return reservation

    def release(self, reservation: Reservation) -> None:
        """Give a reservation back (idempotent)."""
        if not reservation.held:
            return
        reservation.held = False
        if self._held.get(reservation.request_id) is reservation:
            del self._held[reservation.request_id]
        self._users[reservation.user_id].reserved -= reservation.amount_nanos
        if reservation.key_id is not None:
            self._keys[reservation.key_id].reserved -= reservation.amount_nanos

    # --- cache control ----------------------------------------------------------------------

    def forget_user(self, user_id: int) -> None:
        """Reload this user's balance on next use (reservations and pending debits are kept)."""
        account = self._users.get(user_id)
        if account is not None:
            account.limit = None
            account.epoch += 1

    def forget_key(self, key_id: int) -> None:
        """Reload this key's quota and spent counter on next use (reservations are kept)."""
        account = self._keys.get(key_id)
        if account is not None:
            account.limit = None
            account.epoch += 1

    def forget_all_keys(self) -> None:
        """Reload every key's numbers on next use (a key change announced only by hash)."""
        for key_id in list(self._keys):
            self.forget_key(key_id)

    def forget_all_users(self) -> None:
        """Reload every balance on next use."""
        for user_id in list(self._users):
            self.forget_user(user_id)

    def stop(self) -> Deferred[None]:
        """Nothing to hand over: this wallet lives and dies with the process."""
        return succeed(None)

    def available_nanos(self, user_id: int) -> int | None:
        """Cached balance - reserved - pending debits (None when not loaded)."""
        account = self._users.get(user_id)
        if account is None or account.limit is None:
            return None
        return account.limit - account.reserved - account.pending

    def reserved_nanos(self, user_id: int) -> int:
        account = self._users.get(user_id)
        return account.reserved if account else 0

    def key_used_nanos(self, key_id: int) -> int | None:
        """Cached spent + reserved + pending of a key (None when not loaded)."""
        account = self._keys.get(key_id)
        if account is None or account.limit is None:
            return None
        return account.used + account.reserved + account.pending

    # --- the settler's side -----------------------------------------------------------------

    def settling(self, reservation: Reservation | None, user_id: int, key_id: int | None,
                 cost_nanos: int) -> SettlingToken:
        """A settlement was queued: its reservation becomes a pending debit of ``cost``."""
        if reservation is not None:
            self.release(reservation)
        cost = max(0, cost_nanos)
        user = _account(self._users, user_id)
        user.pending += cost
        key = _account(self._keys, key_id) if key_id is not None else None
        if key is not None:
            key.pending += cost
        return SettlingToken(user_id, key_id, cost, user.epoch, key.epoch if key else 0)

    def settled(self, token: SettlingToken, balance_after: int | None = None,
                spent_after: int | None = None, quota: int | None = None, *,
                charged_nanos: int | None = None) -> None:
        """The batch holding ``token`` committed (or was abandoned: both numbers None).

        ``charged_nanos`` is for the shared wallet (it applies commits as deltas); this one
        installs the committed numbers themselves."""
        user = self._users[token.user_id]
        user.pending -= token.cost_nanos
        self._install(user, token.user_epoch, balance_after, 0)
        if token.key_id is not None:
            key = self._keys[token.key_id]
            key.pending -= token.cost_nanos
            if quota is not None and spent_after is not None:
                self._install(key, token.key_epoch, quota, spent_after)

    @staticmethod
    def _install(account: _Account, epoch: int, limit: int | None, used: int) -> None:
        if limit is None:
            return
        if account.epoch != epoch:
            # a forget happened since this settlement was queued: whatever was loaded since
            # may predate this commit, so load again rather than trust either number
            account.limit = None
            account.epoch += 1
            return
        account.limit, account.used = limit, used

    # --- loading ----------------------------------------------------------------------------

    def _ensure(self, account: _Account, query: Callable[..., Any],
                ident: Any) -> Deferred[None] | None:
        if account.limit is not None:
            return None
        waiter: Deferred[None] = Deferred()
        account.waiters.append(waiter)
        if not account.loading:
            account.loading = True
            ensureDeferred(self._load(account, query, ident))
        return waiter

    async def _load(self, account: _Account, query: Callable[..., Any], ident: Any) -> None:
        failure: Failure | None = None
        try:
            while account.limit is None:
                epoch = account.epoch
                values = await self.db.transaction(query, ident)
                if account.limit is not None:
                    break  # a committed batch installed a fresh number meanwhile
                if account.epoch != epoch:
                    continue  # forgotten while loading: the row may predate the change
                account.limit, account.used = values if values is not None else (0, 0)
        except Exception:
            failure = Failure()
        finally:
            account.loading = False
            waiters, account.waiters = account.waiters, []
            for waiter in waiters:
                if failure is None:
                    waiter.callback(None)
                else:
                    waiter.errback(failure)
