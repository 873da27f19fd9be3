"""``WalletBook`` of a ``--workers`` process: the holds live in the supervisor's hub.

Admission asks the hub's ``WalletAuthority`` (one round trip over the Unix socket); everything
the settlement path says -- a hold given back, a debit queued, a batch committed, a forget --
is a message without an answer, sent in order over the one connection, so settling never
waits on another process.  Commits travel as the amount charged (a delta), never as a balance
number: the workers commit independently and their reports may cross.

A busy account needs no message per request: once this worker made ``BUSY_AFTER`` admissions
of one (user, key) within a second, it asks the hub for an *allowance* (a hold the hub keeps
for this worker, ``WalletAuthority.grant``) and admits, releases and settles that account's
requests against it locally; what its committed batches charged goes back as one ``spent``
message per batch, and the allowance is topped up in the background when less than half of
its target (``TARGET_REQUESTS`` reservations) is free.  A request that does not fit asks the
hub as before.  The hub may recall the free part (an admission on another worker does not fit
without it); a forget gives it back too (the numbers changed: admit against the new ones), and
so does ``stop`` (drain).
"""

from __future__ import annotations

import random
from typing import Any

from twisted.internet.defer import Deferred, ensureDeferred, succeed
from twisted.logger import Logger

from gateway.hub.client import HubState
from gateway.ledger.wallet import (
    InsufficientBalance,
    KeyQuotaExceeded,
    Reservation,
    SettlingToken,
    WalletUnavailable,
)
from gateway.ledger.wallet_authority import ADMITTED, NO_BALANCE, RECALL_USER, AllowanceKey

log = Logger()

#: admissions of one account within a second that make it worth an allowance
BUSY_AFTER = 8
#: an allowance aims at this many reservations of the account's latest size (at least)
TARGET_REQUESTS = 32
#: after a recall, no top-up of that allowance for this long (another worker needs the money)
RECALL_PAUSE = 1.0


class _Allowance:
    """What this worker holds of one (user, key) pair: ``size`` is the hub's hold once every
    message sent so far is handled; requests in flight (``in_use``) and settlements queued
    but not committed (``queued``) are inside it."""

    __slots__ = ("asking", "busy_count", "busy_since", "charged", "covered", "epoch", "in_use",
                 "key_id", "paused_until", "queued", "size", "target", "user_id")

    def __init__(self, user_id: int, key_id: int | None) -> None:
        self.user_id = user_id
        self.key_id = key_id
        self.size = 0
        self.in_use = 0
        self.queued = 0
        self.target = 0
        self.asking = False
        #: bumped by every give-back: a grant answered after it is given back at once
        self.epoch = 0
        self.busy_since = 0.0
        self.busy_count = 0
        self.paused_until = 0.0
        #: committed this turn, not reported yet (sent as one "spent" when the batch goes)
        self.charged = 0
        self.covered = 0

    @property
    def free(self) -> int:
        return self.size - self.in_use - self.queued

    def grow(self, amount: int) -> None:
        """The target covers ``TARGET_REQUESTS`` reservations of this size, and twice what
        is in flight (a worker with more calls at once than that would ask the hub for the
        rest)."""
        self.target = max(self.target, max(1, amount) * TARGET_REQUESTS,
                          2 * (self.in_use + self.queued))

    def fits(self, amount: int) -> bool:
        return self.free >= amount if amount > 0 else self.free > 0


class HubWallets:
    """This worker's view of the shared book: its own holds, the numbers in the hub."""

    def __init__(self, hub: HubState) -> None:
        self.hub = hub
        self._held: dict[str, Reservation] = {}
        self._allowances: dict[AllowanceKey, _Allowance] = {}
        #: reservations admitted against an allowance, and settlements queued against one
        self._local: dict[str, _Allowance] = {}
        self._queued: dict[str, tuple[_Allowance, int]] = {}
        self._unreported: list[_Allowance] = []
        self._stopping = False
        #: recalls answered (a grant asked before one and answered after it is void)
        self._recalls = 0
        hub.recall_handler = self._recalled

    @property
    def open_reservations(self) -> int:
        return len(self._held)

    def allowance_nanos(self, user_id: int, key_id: int | None) -> int:
        """What this worker holds of (user, key) as far as it knows (0: no allowance)."""
        allowance = self._allowances.get((user_id, key_id))
        return 0 if allowance is None else allowance.size

    def reserve(self, request_id: str, user_id: int, key_id: int | None, amount_nanos: int,
                *, jwt: bool = False) -> Deferred[Reservation]:
        """Hold ``amount_nanos`` or fail with ``PaymentRequired`` (402) / ``WalletUnavailable``."""
        key_id = None if jwt else key_id
        amount = max(0, amount_nanos)
        allowance = self._allowances.get((user_id, key_id))
        if (allowance is not None and request_id not in self._held and self.hub.available
                and allowance.fits(amount)):
            reservation = Reservation(request_id, user_id, key_id, amount)
            self._held[request_id] = reservation
            self._local[request_id] = allowance
            allowance.in_use += amount
            allowance.grow(amount)
            if allowance.free * 2 < allowance.target:
                self._top_up(allowance)
            return succeed(reservation)
        return ensureDeferred(self._reserve(request_id, user_id, key_id, amount))

    async def _reserve(self, request_id: str, user_id: int, key_id: int | None,
                       amount: int) -> Reservation:
        if request_id in self._held:
            raise ValueError(f"request {request_id!r} already holds a reservation")
        reservation = Reservation(request_id, user_id, key_id, amount)
        self._held[request_id] = reservation  # before the answer: a release may follow it
        try:
            outcome = await self.hub.ask("reserve", request_id, user_id, key_id, amount)
        except Exception as exc:
            self._held.pop(request_id, None)
            raise WalletUnavailable(f"state hub unavailable: {exc}") from exc
        if outcome != ADMITTED:
            self._held.pop(request_id, None)
            raise InsufficientBalance() if outcome == NO_BALANCE else KeyQuotaExceeded()
        self._admitted_by_hub(user_id, key_id, amount)
        return reservation

    # --- allowances -------------------------------------------------------------------------

    def _admitted_by_hub(self, user_id: int, key_id: int | None, amount: int) -> None:
        """Count an admission the hub made; a busy account gets an allowance."""
        allowance = self._allowances.get((user_id, key_id))
        if allowance is None:
            allowance = self._allowances[(user_id, key_id)] = _Allowance(user_id, key_id)
        now = self.hub.seconds()
        if now - allowance.busy_since > 1.0:
            allowance.busy_since, allowance.busy_count = now, 0
        allowance.busy_count += 1
        allowance.grow(amount)
        if allowance.busy_count >= BUSY_AFTER:
            if allowance.size:
                # it did not fit the allowance: more calls at once than the target covers
                allowance.target += max(1, amount)
            self._top_up(allowance)

    def _top_up(self, allowance: _Allowance) -> None:
        """Ask the hub (in the background) for what the allowance lacks of its target."""
        want = allowance.target - allowance.free
        if (allowance.asking or self._stopping or want <= 0 or not self.hub.available
                or self.hub.seconds() < allowance.paused_until):
            return
        allowance.asking = True
        epoch, recalls = allowance.epoch, self._recalls

        def granted(amount: int) -> None:
            allowance.asking = False
            if amount <= 0 or self._recalls != recalls:
                return  # a recall came first: the hub took this grant back
            allowance.size += amount
            if allowance.epoch != epoch or self._stopping:
                self._give_back(allowance)  # recalled or forgotten meanwhile

        def failed(failure: Any) -> None:
            allowance.asking = False
            log.warn("allowance top-up failed: {why}", why=failure.getErrorMessage())

        self.hub.ask("grant", allowance.user_id, allowance.key_id, want).addCallbacks(
            granted, failed)

    def _give_back(self, allowance: _Allowance) -> int:
        """Give the free part back to the hub; returns how much."""
        allowance.epoch += 1
        amount = max(0, allowance.free)
        if amount:
            allowance.size -= amount
            self.hub.tell("give_back_allowance", allowance.user_id, allowance.key_id, amount)
        return amount

    def _recalled(self, kind: str, ident: int) -> list[list[Any]]:
        """The hub wants the free parts on a user's or a key's account.  The answer carries
        the size of every allowance after it (nothing else is sent); grants answered after
        this are dropped, the hub voids them (``WalletAuthority._recalled``)."""
        self._recalls += 1
        pause = self.hub.seconds() + RECALL_PAUSE
        sizes: list[list[Any]] = []
        for allowance in self._allowances.values():
            recalled = (allowance.user_id if kind == RECALL_USER else allowance.key_id) == ident
            if recalled:
                allowance.paused_until = pause
                allowance.size -= max(0, allowance.free)
            # the others only when the hub holds (or is granting) something for them
            if recalled or allowance.size or allowance.asking:
                sizes.append([allowance.user_id, allowance.key_id, allowance.size])
        return sizes

    def _forget_allowances(self, user_id: int | None = None, key_id: int | None = None,
                           every: bool = False) -> None:
        for allowance in self._allowances.values():
            if every or allowance.user_id == user_id or (
                    key_id is not None and allowance.key_id == key_id):
                self._give_back(allowance)

    # --- requests and settlements -----------------------------------------------------------

    def release(self, reservation: Reservation) -> None:
        """Give a reservation back (idempotent)."""
        if not reservation.held:
            return
        reservation.held = False
        if self._held.get(reservation.request_id) is reservation:
            del self._held[reservation.request_id]
            allowance = self._local.pop(reservation.request_id, None)
            if allowance is not None:
                allowance.in_use -= reservation.amount_nanos
            else:
                self.hub.tell("give_back", reservation.request_id)

    def settling(self, reservation: Reservation | None, user_id: int, key_id: int | None,
                 cost_nanos: int) -> SettlingToken:
        """A settlement was queued: its reservation becomes a queued debit of ``cost``."""
        if reservation is not None and reservation.request_id in self._local and (
                self._held.get(reservation.request_id) is reservation):
            return self._settling_locally(reservation, user_id, key_id, cost_nanos)
        held = ""
        if reservation is not None and reservation.held:
            reservation.held = False
            if self._held.get(reservation.request_id) is reservation:
                del self._held[reservation.request_id]
                held = reservation.request_id
        cost = max(0, cost_nanos)
        ref = ""
        if cost:
            ref = (reservation.request_id if reservation is not None
                   else f"n{random.getrandbits(64):016x}")
        if held or ref:
            self.hub.tell("settling", held, ref, user_id, key_id, cost)
        return SettlingToken(user_id, key_id, cost, 0, 0, ref=ref)

    def _settling_locally(self, reservation: Reservation, user_id: int, key_id: int | None,
                          cost_nanos: int) -> SettlingToken:
        """Settling a request its allowance admitted: the cost stays inside the allowance
        until the batch commits (``settled`` says what it charged)."""
        reservation.held = False
        del self._held[reservation.request_id]
        allowance = self._local.pop(reservation.request_id)
        allowance.in_use -= reservation.amount_nanos
        cost = max(0, cost_nanos)
        ref = ""
        if cost:
            ref = reservation.request_id
            allowance.queued += cost
            self._queued[ref] = (allowance, cost)
        return SettlingToken(user_id, key_id, cost, 0, 0, ref=ref)

    def settled(self, token: SettlingToken, balance_after: int | None = None,
                spent_after: int | None = None, quota: int | None = None, *,
                charged_nanos: int | None = None) -> None:
        """The batch holding ``token`` committed (``charged_nanos`` = what it took), or was
        abandoned (no numbers: nothing changed in the database)."""
        if not token.ref:
            return
        committed = balance_after is not None or charged_nanos is not None
        charged = None if not committed else (
            token.cost_nanos if charged_nanos is None else max(0, charged_nanos))
        local = self._queued.pop(token.ref, None)
        if local is None:
            self.hub.tell("settled", token.ref, charged)
            return
        allowance, cost = local
        allowance.queued -= cost
        if charged:
            # what the allowance holds pays; a charge above it (the request cost more than
            # its estimate) moves the balance only, as a queued debit would
            covered = min(charged, max(0, allowance.size))
            allowance.size -= covered
            # one "spent" per allowance and batch, however many calls it committed
            if not allowance.charged and not allowance.covered:
                self._unreported.append(allowance)
                if len(self._unreported) == 1:
                    self.hub.before_flush(self._report_spent)
            allowance.charged += charged
            allowance.covered += covered

    def _report_spent(self) -> None:
        unreported, self._unreported = self._unreported, []
        for allowance in unreported:
            self.hub.tell("spent", allowance.user_id, allowance.key_id, allowance.charged,
                          allowance.covered)
            allowance.charged = allowance.covered = 0

    def forget_user(self, user_id: int) -> None:
        self._forget_allowances(user_id=user_id)
        self.hub.tell("forget", "user", user_id)

    def forget_key(self, key_id: int) -> None:
        self._forget_allowances(key_id=key_id)
        self.hub.tell("forget", "key", key_id)

    def forget_all_keys(self) -> None:
        self._forget_allowances(every=True)
        self.hub.tell("forget", "all-keys", 0)

    def forget_all_users(self) -> None:
        self._forget_allowances(every=True)
        self.hub.tell("forget", "all-users", 0)

    def stop(self) -> Deferred[None]:
        """Gives every allowance back (drain); fires once the hub handled every message
        sent so far."""
        self._stopping = True
        self._forget_allowances(every=True)
        d = self.hub.barrier()
        d.addErrback(lambda _: None)
        return d
