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

Allowances: a round trip to this object for every request costs both processes a few hundred
microseconds of Python.  So a busy worker asks for an *allowance* of an account pair (user,
key): a hold like any other, owned by the worker, which then admits, settles and releases its
requests against it without asking (``gateway.hub.wallets``), and reports only what its
committed batches charged (``spent``: the hold shrinks and the balance moves by the same
amount, so what is free for others does not change).  The worker's in-flight requests and
queued debits stay inside the hold, so the sum of every hold, allowance and queued debit never
exceeds a balance or a quota -- exactly the one-process rule.  An allowance takes at most
``1 / GRANT_SHARE`` of what is free; and when an admission does not fit, the free parts of the
other workers' allowances on that account are recalled first (``Owner.recall``), so an idle
allowance never refuses a request that the balance covers.  A dead worker's allowances are
dropped with its other holds, and the accounts they touched reload from the database (its
last commits may not have been reported).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from twisted.internet.defer import Deferred, DeferredList
from twisted.logger import Logger

from gateway.store.billing_writes import load_key_quota, load_user_balance
from gateway.store.pool import DBRunner

log = Logger()

#: outcomes of ``reserve``
ADMITTED = "ok"
NO_BALANCE = "balance"
NO_QUOTA = "quota"
#: an allowance takes at most this fraction (1/n) of what is free on its accounts
GRANT_SHARE = 4
#: which accounts a recall is about
RECALL_USER = "user"
RECALL_KEY = "key"

#: (user id, key id) of an allowance; a recall's answer: [user, key, size now] per allowance
AllowanceKey = tuple[int, int | None]
Recall = Callable[[str, int], Deferred[list[list[Any]]]]


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


@dataclass(eq=False)  # an owner is its identity (a set of holders holds it)
class Owner:
    """One worker's holds, queued debits and allowances."""

    name: str
    holds: dict[str, _Hold] = field(default_factory=dict)
    debits: dict[str, _Hold] = field(default_factory=dict)
    allowances: dict[AllowanceKey, _Hold] = field(default_factory=dict)
    #: asks the worker for the free parts of its allowances on a user's / a key's account
    recall: Recall | None = None
    #: recalls answered so far (a grant that was loading across one is void)
    recalls: int = 0


class WalletAuthority:
    """Reservations, queued debits and committed deltas of every worker."""

    def __init__(self, db: DBRunner) -> None:
        self.db = db
        self._users: dict[int, _Account] = {}
        self._keys: dict[int, _Account] = {}
        #: owners that hold (or held) an allowance: the ones a recall asks
        self._holders: set[Owner] = set()

    # --- admission --------------------------------------------------------------------------

    async def reserve(self, owner: Owner, request_id: str, user_id: int, key_id: int | None,
                      amount: int) -> str:
        """Hold ``amount`` for ``owner``'s request; returns ``ADMITTED`` or why not."""
        if request_id in owner.holds:
            raise ValueError(f"request {request_id!r} already holds a reservation")
        recalled: set[str] = set()
        while True:
            user, key = await self._loaded(user_id, key_id)
            outcome = self._admit(owner, request_id, user, key, user_id, key_id, max(0, amount))
            if outcome == ADMITTED or outcome in recalled:
                return outcome
            # what other workers' allowances hold but do not use may cover it: ask for it
            # back once per kind of shortage, then decide
            recalled.add(outcome)
            kind, ident = ((RECALL_USER, user_id) if outcome == NO_BALANCE
                           else (RECALL_KEY, key_id))
            assert ident is not None
            if not await self._recall(kind, ident):
                return outcome  # no allowance elsewhere holds any of it

    async def _loaded(self, user_id: int, key_id: int | None
                      ) -> tuple[_Account, _Account | None]:
        """The accounts of a user (and a key), their numbers loaded."""
        user = self._users.setdefault(user_id, _Account())
        key = self._keys.setdefault(key_id, _Account()) if key_id is not None else None
        while user.limit is None or (key is not None and key.limit is None):
            if user.limit is None:
                await self._ensure(user, load_user_balance, user_id)
            if key is not None and key.limit is None:
                await self._ensure(key, load_key_quota, key_id)
        return user, key

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

    # --- allowances -------------------------------------------------------------------------

    async def grant(self, owner: Owner, user_id: int, key_id: int | None, want: int) -> int:
        """Add up to ``want`` to ``owner``'s allowance on (user, key); returns what was added
        (at most ``1 / GRANT_SHARE`` of what is free on the balance and the key quota)."""
        recalls = owner.recalls
        user, key = await self._loaded(user_id, key_id)
        if owner.recalls != recalls:
            return 0  # recalled while loading: the worker drops this grant's answer
        assert user.limit is not None
        free = user.limit - user.reserved - user.pending
        if key is not None and key.limit is not None and key.limit > 0:
            free = min(free, key.limit - key.used - key.reserved - key.pending)
        amount = max(0, min(want, free // GRANT_SHARE))
        if amount:
            hold = owner.allowances.setdefault((user_id, key_id), _Hold(user_id, key_id, 0))
            self._hold(hold, amount)
            self._holders.add(owner)
        return amount

    def give_back(self, owner: Owner, user_id: int, key_id: int | None, amount: int) -> None:
        """``owner`` gives ``amount`` of its allowance on (user, key) back, unused."""
        hold = owner.allowances.get((user_id, key_id))
        if hold is None or amount <= 0:
            return
        self._hold(hold, -amount)
        if hold.amount == 0:
            del owner.allowances[(user_id, key_id)]

    def spent(self, owner: Owner, user_id: int, key_id: int | None, charged: int,
              covered: int) -> None:
        """Batches of ``owner`` committed ``charged`` against its allowance on (user, key), of
        which the allowance held ``covered`` (the worker says: a charge above a request's
        estimate may exceed what is left): the hold shrinks by ``covered``, the balance and
        the key's spend move by ``charged``."""
        if charged <= 0:
            return
        hold = owner.allowances.get((user_id, key_id))
        if hold is not None and covered > 0:
            self._hold(hold, -min(covered, hold.amount))
        self._committed(self._users.setdefault(user_id, _Account()),
                        self._keys.setdefault(key_id, _Account()) if key_id is not None
                        else None, charged)

    def _hold(self, hold: _Hold, delta: int) -> None:
        hold.amount += delta
        self._users.setdefault(hold.user_id, _Account()).reserved += delta
        if hold.key_id is not None:
            self._keys.setdefault(hold.key_id, _Account()).reserved += delta

    async def _recall(self, kind: str, ident: int) -> bool:
        """Ask every worker holding an allowance on the account for its free part; True if
        any was asked (concurrent recalls share what comes back: admit again either way)."""
        index = 0 if kind == RECALL_USER else 1

        def apply(answer: list[list[Any]], owner: Owner) -> None:
            # at once, as the answer arrives: the owner's later messages are deltas on top
            self._recalled(owner, answer)

        holders: list[Owner] = []
        asks: list[Deferred[None]] = []
        for owner in self._holders:
            if owner.recall is not None and any(
                    hold.amount > 0 and allowance[index] == ident
                    for allowance, hold in owner.allowances.items()):
                holders.append(owner)
                asks.append(owner.recall(kind, ident).addCallback(apply, owner))
        if not holders:
            return False
        for ok, answer in await DeferredList(asks, consumeErrors=True):
            if not ok:
                failure: Any = answer
                log.warn("a worker did not answer a recall of its allowances: {why}",
                         why=failure.getErrorMessage())
        return True

    def _recalled(self, owner: Owner, answer: list[list[Any]]) -> None:
        """The worker's answer to a recall: the size of each of its allowances now.  Grants
        on their way to it are void (it drops those it hears of after the recall; a grant
        still loading is refused: ``recalls`` moved), so each hold becomes that size."""
        owner.recalls += 1
        for user_id, key_id, size in answer:
            hold = owner.allowances.get((user_id, key_id))
            if hold is None:
                continue
            self._hold(hold, size - hold.amount)
            if hold.amount == 0:
                del owner.allowances[(user_id, key_id)]

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
        self._committed(user, key, charged)

    @staticmethod
    def _committed(user: _Account, key: _Account | None, charged: int) -> None:
        """A commit charged ``charged``: the balance falls and the key's spend grows."""
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
        """A worker died: give back its holds and allowances, drop its queued debits and
        reload the accounts they touched (its last batch may or may not have committed, and
        been reported).  Returns how many holds, allowances and debits were dropped."""
        dropped = len(owner.holds) + len(owner.debits) + len(owner.allowances)
        for request_id in list(owner.holds):
            self.release(owner, request_id)
        for hold in owner.allowances.values():
            self._hold(hold, -hold.amount)
            self.forget_user(hold.user_id)
            if hold.key_id is not None:
                self.forget_key(hold.key_id)
        owner.allowances.clear()
        self._holders.discard(owner)
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
