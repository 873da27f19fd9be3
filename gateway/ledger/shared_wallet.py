"""Reservations held in Redis, for several gateway processes sharing one database and one Redis.

Why: ``Wallets`` admits against a per-process cache.  With several processes, one process does
not see another's reservations, queued debits or commits, so the fleet as a whole could admit
far more than a balance or a key quota covers.  Here every process checks and adds in one Redis
script (``wallet_scripts``), against numbers every process moves:

- the committed ``limit`` (balance; quota and ``used`` for a key) is loaded from the database
  on first use and after a forget, and then moved by each commit as a *delta* (deltas of
  different processes commute, so their order does not matter);
- a load installs its number only if no forget bumped the account's ``ver`` while it read the
  database (the row may predate the change: read again).  Commits that land meanwhile find no
  limit to move and add to ``missed`` instead; the install subtracts what ``missed`` grew by
  since the load began.  A commit the database read already included is then counted twice,
  as is one whose delta lands after the install -- that can only refuse too early, never admit
  too much, and the next forget (top-up, admin edit) repairs it.  Commits never make a load
  start over: with a busy account (a report every millisecond) every load would race one, and
  admission would fail with 503 until the traffic stopped;
- reservations and queued debits are held as members of one sorted set, scored by an expiry
  (a lease of ``hold_seconds``, 30) that their process renews every ``renew_interval`` (5 s);
  a process that dies stops renewing, and the sweep every process runs after each renewal
  gives its holds back once they expire.  A dead process's holds are therefore back at most
  ``hold_seconds + renew_interval`` (35 s) after its death, inside the 60 s the operations
  contract (section 7) allows, and a live process may miss five renewals before it loses one.
  An expired queued debit also drops its accounts' limits: its process may have committed it
  and died before reporting the delta, so only the database knows whether the limit includes
  it.  Expiries are read from each process's clock (the reactor's, injected): processes that
  share a fleet keep their clocks in step (NTP) to well within the lease's 25 s of slack, and
  one clock per test drives expiry deterministically.

Redis unreachable -> ``WalletUnavailable`` at admission (the request fails closed with 503);
the settlement side never waits on Redis and only logs what it could not tell it.  When Redis
comes back (``RedisState.on_recovered``) each process puts its own holds back (``RESTORE``:
Redis may have restarted empty, or the sweep may have taken them meanwhile), and the cache
listeners forget every account (``forget_all_users`` / ``forget_all_keys``): the forgets sent
while Redis was away are lost, so limits are loaded again from the database.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeGuard

from twisted.internet.defer import Deferred, DeferredList, ensureDeferred
from twisted.internet.interfaces import IReactorTime
from twisted.internet.task import LoopingCall
from twisted.logger import Logger
from twisted.python.failure import Failure

from gateway.ledger import wallet_scripts as scripts
from gateway.ledger.wallet import (
    InsufficientBalance,
    KeyQuotaExceeded,
    Reservation,
    SettlingToken,
    WalletUnavailable,
)
from gateway.state.protocol import SharedState, SharedStateUnavailable
from gateway.store.billing_writes import load_key_quota, load_user_balance
from gateway.store.pool import DBRunner

if TYPE_CHECKING:  # txredisapi imports the reactor: only the running app may import it
    from gateway.state.redis import RedisState

log = Logger()


def needs_shared_wallets(state: SharedState) -> TypeGuard[RedisState]:
    """A state shared across processes (Redis) needs the reservations shared through it
    too: the state says which kind it is, so the wiring needs no ``isinstance`` on it."""
    return state.shared_across_processes


HOLDS = "wallet:holds"
KEY_GENERATION = "wallet:kgen"
USER_GENERATION = "wallet:ugen"
ACCOUNTS = "wallet:"


def _user(user_id: int) -> str:
    return f"{ACCOUNTS}u:{user_id}"


def _key(key_id: int) -> str:
    return f"{ACCOUNTS}k:{key_id}"


def _member(kind: str, request_id: str, user_id: int, key_id: int | None, amount: int) -> str:
    return f"{kind}:{request_id}:{user_id}:{'' if key_id is None else key_id}:{amount}"


class SharedWallets:
    """``Wallets``' interface over Redis; one per process."""

    #: how many admission attempts may meet a missing account (each triggers a load)
    MAX_LOADS = 4

    def __init__(self, db: DBRunner, redis: RedisState, clock: IReactorTime, *,
                 hold_seconds: float = 30, renew_interval: float = 5,
                 sweep_batch: int = 500) -> None:
        if renew_interval * 2 > hold_seconds:
            raise ValueError("holds must outlive two renew intervals")
        self.db = db
        self.redis = redis
        self.clock = clock
        self.hold_seconds = hold_seconds
        self.sweep_batch = sweep_batch
        self._held: dict[str, tuple[Reservation, str]] = {}
        #: queued debits of this process (members), renewed until their batch committed
        self._pending: set[str] = set()
        self._loads: dict[str, list[Deferred[None]]] = {}
        #: updates sent and not yet answered (``stop`` waits for them)
        self._telling: set[Deferred[Any]] = set()
        self._renewer = LoopingCall(self.renew)
        self._renewer.clock = clock
        self._renew_interval = renew_interval
        self._remove_recovered: Callable[[], None] | None = None

    @property
    def open_reservations(self) -> int:
        return len(self._held)

    # --- lifecycle ----------------------------------------------------------------------

    def start(self) -> None:
        self._renewer.start(self._renew_interval, now=False)
        self._remove_recovered = self.redis.on_recovered(self._recovered)

    def stop(self) -> Deferred[None]:
        """Stop renewing; fires once the updates already sent have been answered."""
        if self._renewer.running:
            self._renewer.stop()
        if self._remove_recovered is not None:
            self._remove_recovered()
            self._remove_recovered = None
        return self.answered()

    def answered(self) -> Deferred[None]:
        """Fires once every update sent so far (release, settling, commit, forget) has been
        answered.  Commands go out over a pool of connections, so a later command is no
        barrier for an earlier one: shutdown and tests wait here instead."""
        done: Deferred[Any] = DeferredList(list(self._telling), consumeErrors=True)
        return done.addCallback(lambda _: None)

    def _expires_ms(self) -> int:
        return int((self.clock.seconds() + self.hold_seconds) * 1000)

    def _accounts(self, user_id: int, key_id: int | None) -> list[str]:
        return [HOLDS, _user(user_id)] + ([] if key_id is None else [_key(key_id)])

    def _admission_keys(self, user_id: int, key_id: int | None) -> list[str]:
        keys = [HOLDS, _user(user_id), USER_GENERATION]
        return keys if key_id is None else [*keys, _key(key_id), KEY_GENERATION]

    # --- requests -----------------------------------------------------------------------

    def reserve(self, request_id: str, user_id: int, key_id: int | None, amount_nanos: int,
                *, jwt: bool = False) -> Deferred[Reservation]:
        """Hold ``amount_nanos`` for a request, or fail with ``PaymentRequired`` (402) or
        ``WalletUnavailable``."""
        return ensureDeferred(self._reserve(request_id, user_id, None if jwt else key_id,
                                            max(0, amount_nanos)))

    async def _reserve(self, request_id: str, user_id: int, key_id: int | None,
                       amount: int) -> Reservation:
        if request_id in self._held:
            raise ValueError(f"request {request_id!r} already holds a reservation")
        member = _member("r", request_id, user_id, key_id, amount)
        for _ in range(self.MAX_LOADS):
            status, which = await self._run(scripts.RESERVE,
                                            self._admission_keys(user_id, key_id),
                                            [amount, member, self._expires_ms()])
            if status == 1:
                reservation = Reservation(request_id, user_id, key_id, amount)
                self._held[request_id] = (reservation, member)
                return reservation
            if status == 0:
                raise InsufficientBalance() if which == 1 else KeyQuotaExceeded()
            if which == 1:
                await self._load(_user(user_id), load_user_balance, user_id)
            else:
                assert key_id is not None
                await self._load(_key(key_id), load_key_quota, key_id)
        raise WalletUnavailable("account kept changing while it was loaded")

    def release(self, reservation: Reservation) -> None:
        """Give a reservation back (idempotent)."""
        if not reservation.held:
            return
        reservation.held = False
        found = self._held.pop(reservation.request_id, None)
        if found is None or found[0] is not reservation:
            return
        self._tell(scripts.SETTLING, self._accounts(reservation.user_id, reservation.key_id),
                   [found[1], reservation.amount_nanos, "", 0, 0])

    # --- the settler's side -------------------------------------------------------------

    def settling(self, reservation: Reservation | None, user_id: int, key_id: int | None,
                 cost_nanos: int) -> SettlingToken:
        """A settlement was queued: its reservation becomes a queued debit of ``cost``."""
        held = ""
        amount = 0
        if reservation is not None and reservation.held:
            reservation.held = False
            found = self._held.pop(reservation.request_id, None)
            if found is not None and found[0] is reservation:
                held, amount = found[1], reservation.amount_nanos
        cost = max(0, cost_nanos)
        debit = ""
        if cost:
            ref = (reservation.request_id if reservation is not None
                   else f"n{random.getrandbits(64):016x}")
            debit = _member("p", ref, user_id, key_id, cost)
            self._pending.add(debit)
        if held or debit:
            self._tell(scripts.SETTLING, self._accounts(user_id, key_id),
                       [held, amount, debit, cost, self._expires_ms()])
        return SettlingToken(user_id, key_id, cost, 0, 0, ref=debit)

    def settled(self, token: SettlingToken, balance_after: int | None = None,
                spent_after: int | None = None, quota: int | None = None, *,
                charged_nanos: int | None = None) -> None:
        """The batch holding ``token`` committed (``charged_nanos`` = what it took), or was
        abandoned (no numbers: nothing changed in the database)."""
        if not token.ref:
            return  # nothing was queued: a zero cost charges nothing
        self._pending.discard(token.ref)
        committed = balance_after is not None or charged_nanos is not None
        charged = "" if not committed else str(
            token.cost_nanos if charged_nanos is None else max(0, charged_nanos))
        self._tell(scripts.SETTLED, self._accounts(token.user_id, token.key_id),
                   [token.ref, token.cost_nanos, charged],
                   on_failure=lambda: self._forget_later(token.user_id, token.key_id))

    # --- cache control ------------------------------------------------------------------

    def forget_user(self, user_id: int) -> None:
        self._tell(scripts.FORGET, [_user(user_id)], [])

    def forget_key(self, key_id: int) -> None:
        self._tell(scripts.FORGET, [_key(key_id)], [])

    def forget_all_keys(self) -> None:
        """Reload every key's numbers on next use (a key change announced only by hash): one
        increment of the key generation, whatever the number of keys."""
        self._tell(scripts.FORGET_ALL, [KEY_GENERATION], [])

    def forget_all_users(self) -> None:
        """Reload every balance on next use (forgets may have been lost): one increment of the
        user generation, whatever the number of users."""
        self._tell(scripts.FORGET_ALL, [USER_GENERATION], [])

    def _forget_later(self, user_id: int, key_id: int | None) -> None:
        # a commit we could not apply must not leave a number that is too high: reload instead
        self.clock.callLater(1.0, self.forget_user, user_id)
        if key_id is not None:
            self.clock.callLater(1.0, self.forget_key, key_id)

    # --- expiry of holds ----------------------------------------------------------------

    def renew(self) -> Deferred[None]:
        """Push out the expiry of this process's holds, then sweep everybody's expired ones."""
        return ensureDeferred(self._renew())

    async def _renew(self) -> None:
        members = [member for _, member in self._held.values()] + list(self._pending)
        expires = self._expires_ms()
        try:
            for start in range(0, len(members), 500):
                await self._run(scripts.RENEW, [HOLDS],
                                [expires, *members[start:start + 500]])
            await self.sweep()
        except WalletUnavailable as exc:
            log.warn("could not renew wallet holds: {error}", error=exc)

    def _recovered(self) -> None:
        ensureDeferred(self.restore())

    async def restore(self) -> int:
        """Put this process's holds back into Redis (after it was lost); returns how many
        were missing.  A hold given back over another pooled connection at the same moment
        may be counted again: it is never renewed after, so the sweep takes it within the
        lease (that can only refuse early, never admit too much)."""
        members = [member for _, member in self._held.values()] + list(self._pending)
        expires = self._expires_ms()
        restored = 0
        try:
            for start in range(0, len(members), 500):
                (added,) = await self._run(
                    scripts.RESTORE, [HOLDS],
                    [expires, self.redis.prefix + ACCOUNTS, *members[start:start + 500]])
                restored += added
        except WalletUnavailable as exc:
            log.warn("could not restore wallet holds: {error}", error=exc)
        if restored:
            log.info("put back {n} wallet holds lost with Redis", n=restored)
        return restored

    async def sweep(self) -> int:
        """Give back holds whose process stopped renewing them; returns how many."""
        now_ms = int(self.clock.seconds() * 1000)
        (swept,) = await self._run(scripts.SWEEP, [HOLDS],
                                   [now_ms, self.redis.prefix + ACCOUNTS, self.sweep_batch])
        if swept:
            log.warn("gave back {n} expired wallet holds", n=swept)
        return swept

    # --- Redis --------------------------------------------------------------------------

    async def _load(self, account: str, query: Callable[..., Any], ident: int) -> None:
        """One database read per account however many admissions wait for it."""
        waiter: Deferred[None] = Deferred()
        waiters = self._loads.get(account)
        if waiters is None:
            waiters = self._loads[account] = []
            ensureDeferred(self._load_once(account, query, ident)).addBoth(
                self._loaded, account)
        waiters.append(waiter)
        await waiter

    def _loaded(self, result: Any, account: str) -> None:
        for waiter in self._loads.pop(account, []):
            if isinstance(result, Failure):
                waiter.errback(result)
            else:
                waiter.callback(None)

    async def _load_once(self, account: str, query: Callable[..., Any], ident: int) -> None:
        ver, missed = await self.load_marks(account)
        values = await self.db.transaction(query, ident)
        limit, used = values if values is not None else (0, 0)
        kind = "k" if query is load_key_quota else "u"
        await self._run(scripts.INSTALL, [account], [ver, missed, limit, used, kind])

    async def load_marks(self, account: str) -> tuple[bytes, bytes]:
        """(``ver``, ``missed``) of an account, read before a load reads the database."""
        try:
            reply = await self.redis.raw_command("HMGET", self.redis.prefix + account, "ver",
                                                 "missed")
        except Exception as exc:
            raise WalletUnavailable(f"shared wallet unavailable: {exc}") from exc
        ver, missed = (b"0" if value is None else value if isinstance(value, bytes)
                       else str(value).encode() for value in reply)
        return ver, missed

    async def _run(self, script: bytes, keys: list[str], args: list[Any]) -> list[int]:
        try:
            return await self.redis.run_script(script, keys, args)
        except Exception as exc:
            raise WalletUnavailable(f"shared wallet unavailable: {exc}") from exc

    def _tell(self, script: bytes, keys: list[str], args: list[Any],
              on_failure: Callable[[], None] | None = None) -> None:
        """Fire and forget (the settlement path never waits on Redis); failures are logged."""
        def failed(failure: Any) -> None:
            if failure.check(SharedStateUnavailable):
                # an outage, not a bug: one line each (recovery forgets every account anyway)
                log.warn("shared wallet update not sent: {error}",
                         error=failure.getErrorMessage())
            else:
                log.failure("shared wallet update failed", failure)
            if on_failure is not None:
                on_failure()

        d = self.redis.run_script(script, keys, args)
        self._telling.add(d)
        d.addErrback(failed)
        d.addBoth(lambda _: self._telling.discard(d))

