"""The one book of reservations that ``--workers`` processes share, held by their supervisor.

Why: each worker admitting against its own ``Wallets`` cache would let N workers together
admit up to N times a balance.  Here one object -- in the supervisor, asked by every worker
over the state hub (``gateway.hub``) -- checks and adds in one synchronous step, as
``Wallets`` does for one process, so the workers together never hold more than a balance or a
key quota covers.

What differs from ``Wallets``: settlements are committed by the workers, each in its own
transactions, and their reports arrive in no particular order.  A committed *number* (balance
after a batch) from one worker may be older than one already installed from another, so commits
are applied as *deltas* (``limit -= charged`` for a balance, ``used += charged`` for a key),
which commute.  A load reads the database while deltas may arrive: deltas that arrive while an
account is unloaded are added to ``missed``, and the load subtracts what ``missed`` grew by
during its read.  A commit the read already included is then counted twice -- that can only
refuse too early, never admit too much -- until the next forget (top-up, admin edit) reloads
it.  (The Redis-shared wallet, ``shared_wallet``, makes the same trade for the same reason.)

Ownership: every hold and queued debit belongs to an ``owner`` (one worker's connection).  When
a worker dies its holds are given back at once and the accounts its queued debits touched are
reloaded from the database: whether its last batch committed or not, the ledger says which.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from twisted.internet.defer import Deferred

from gateway.store.billing_writes import load_key_quota, load_user_balance
from gateway.store.pool import DBRunner

#: outcomes of ``reserve``
ADMITTED = "ok"
NO_BALANCE = "balance"
NO_QUOTA = "quota"


class _Account:
    """(limit, used) of a user (balance, 0) or a key (quota, spent) and what is in flight."""

    __slots__ = ("limit", "loading", "missed", "pending", "reserved", "used", "ver", "waiters")

    def __init__(self) -> None:
        self.limit: int | None = None
        self.used = 0
        self.reserved = 0
        self.pending = 0
        #: bumped by every forget: a load that saw it move reads again
        self.ver = 0
        #: sum of commits that arrived while no number was loaded
        self.missed = 0
        self.loading = False
        self.waiters: list[Deferred[None]] = []


@dataclass
class _Hold:
    user_id: int
    key_id: int | None
    amount: int


@dataclass
class Owner:
    """One worker's holds and queued debits."""

    name: str
    holds: dict[str, _Hold] = field(default_factory=dict)
    debits: dict[str, _Hold] = field(default_factory=dict)


class WalletAuthority:
    """Reservations, queued debits and committed deltas of every worker."""

    def __init__(self, db: DBRunner) -> None:
        self.db = db
        self._users: dict[int, _Account] = {}
        self._keys: dict[int, _Account] = {}

    # --- admission --------------------------------------------------------------------------

    async def reserve(self, owner: Owner, request_id: str, user_id: int, key_id: int | None,
                      amount: int) -> str:
        """Hold ``amount`` for ``owner``'s request; returns ``ADMITTED`` or why not."""
        if request_id in owner.holds:
            raise ValueError(f"request {request_id!r} already holds a reservation")
        user = self._users.setdefault(user_id, _Account())
        key = self._keys.setdefault(key_id, _Account()) if key_id is not None else None
        while user.limit is None or (key is not None and key.limit is None):
            if user.limit is None:
                await self._ensure(user, load_user_balance, user_id)
            if key is not None and key.limit is None:
                await self._ensure(key, load_key_quota, key_id)
        return self._admit(owner, request_id, user, key, user_id, key_id, max(0, amount))

    def _admit(self, owner: Owner, request_id: str, user: _Account, key: _Account | None,
               user_id: int, key_id: int | None, amount: int) -> str:
        # synchronous on purpose: the checks and the adds are one atomic step
        assert user.limit is not None
        if user.limit - user.reserved - user.pending < amount:
            return NO_BALANCE
        if key is not None:
            assert key.limit is not None
            if key.limit > 0 and key.used + key.reserved + key.pending + amount > key.limit:
                return NO_QUOTA
            key.reserved += amount
        user.reserved += amount
        owner.holds[request_id] = _Hold(user_id, key_id, amount)
        return ADMITTED

    def release(self, owner: Owner, request_id: str) -> None:
        """Give a hold back (idempotent)."""
        hold = owner.holds.pop(request_id, None)
        if hold is None:
            return
        self._users[hold.user_id].reserved -= hold.amount
        if hold.key_id is not None:
            self._keys[hold.key_id].reserved -= hold.amount

    # --- settlement -------------------------------------------------------------------------

    def settling(self, owner: Owner, held: str, ref: str, user_id: int, key_id: int | None,
                 cost: int) -> None:
        """A settlement was queued: the hold ``held`` (if any) becomes the debit ``ref``."""
        if held:
            self.release(owner, held)
        cost = max(0, cost)
        if not ref or not cost:
            return
        self._users.setdefault(user_id, _Account()).pending += cost
        if key_id is not None:
            self._keys.setdefault(key_id, _Account()).pending += cost
        owner.debits[ref] = _Hold(user_id, key_id, cost)

    def settled(self, owner: Owner, ref: str, charged: int | None) -> None:
        """Debit ``ref`` committed ``charged`` (None: abandoned, nothing changed)."""
        debit = owner.debits.pop(ref, None)
        if debit is None:
            return
        user = self._users[debit.user_id]
        user.pending -= debit.amount
        key = self._keys[debit.key_id] if debit.key_id is not None else None
        if key is not None:
            key.pending -= debit.amount
        if charged is None or charged <= 0:
            return
        if user.limit is None:
            user.missed += charged
        else:
            user.limit -= charged
        if key is not None:
            if key.limit is None:
                key.missed += charged
            else:
                key.used += charged

    def owner_lost(self, owner: Owner) -> int:
        """A worker died: give back its holds, drop its queued debits and reload the accounts
        they touched (its last batch may or may not have committed).  Returns how many holds
        and debits were dropped."""
        dropped = len(owner.holds) + len(owner.debits)
        for request_id in list(owner.holds):
            self.release(owner, request_id)
        for debit in owner.debits.values():
            self._users[debit.user_id].pending -= debit.amount
            self.forget_user(debit.user_id)
            if debit.key_id is not None:
                self._keys[debit.key_id].pending -= debit.amount
                self.forget_key(debit.key_id)
        owner.debits.clear()
        return dropped

    # --- cache control ----------------------------------------------------------------------

    def forget_user(self, user_id: int) -> None:
        self._forget(self._users.get(user_id))

    def forget_key(self, key_id: int) -> None:
        self._forget(self._keys.get(key_id))

    def forget_all_users(self) -> None:
        for account in self._users.values():
            self._forget(account)

    def forget_all_keys(self) -> None:
        for account in self._keys.values():
            self._forget(account)

    @staticmethod
    def _forget(account: _Account | None) -> None:
        if account is not None:
            account.limit = None
            account.ver += 1

    def available_nanos(self, user_id: int) -> int | None:
        """Loaded balance - holds - queued debits (None when not loaded)."""
        account = self._users.get(user_id)
        if account is None or account.limit is None:
            return None
        return account.limit - account.reserved - account.pending

    # --- loading ----------------------------------------------------------------------------

    def _ensure(self, account: _Account, query: Callable[..., Any], ident: Any) -> Deferred[None]:
        waiter: Deferred[None] = Deferred()
        account.waiters.append(waiter)
        if not account.loading:
            account.loading = True
            Deferred.fromCoroutine(self._load(account, query, ident))
        return waiter

    async def _load(self, account: _Account, query: Callable[..., Any], ident: Any) -> None:
        failure: BaseException | None = None
        try:
            while account.limit is None:
                ver, missed = account.ver, account.missed
                values = await self.db.transaction(query, ident)
                if account.limit is not None:
                    break
                if account.ver != ver:
                    continue  # forgotten while reading: the row may predate the change
                limit, used = values if values is not None else (0, 0)
                grew = account.missed - missed
                if query is load_key_quota:
                    account.limit, account.used = limit, used + grew
                else:
                    account.limit, account.used = limit - grew, used
                account.missed = 0
        except Exception as exc:
            failure = exc
        finally:
            account.loading = False
            waiters, account.waiters = account.waiters, []
            for waiter in waiters:
                if failure is None:
                    waiter.callback(None)
                else:
                    waiter.errback(failure)
