"""``WalletBook`` of a ``--workers`` process: the holds live in the supervisor's hub.

Admission asks the hub's ``WalletAuthority`` (one round trip over the Unix socket); everything
the settlement path says -- a hold given back, a debit queued, a batch committed, a forget --
is a message without an answer, sent in order over the one connection, so settling never
waits on another process.  Commits travel as the amount charged (a delta), never as a balance
number: the workers commit independently and their reports may cross.
"""

from __future__ import annotations

import random

from twisted.internet.defer import Deferred, ensureDeferred

from gateway.hub.client import HubState
from gateway.ledger.wallet import (
    InsufficientBalance,
    KeyQuotaExceeded,
    Reservation,
    SettlingToken,
    WalletUnavailable,
)
from gateway.ledger.wallet_authority import ADMITTED, NO_BALANCE


class HubWallets:
    """This worker's view of the shared book: its own holds, the numbers in the hub."""

    def __init__(self, hub: HubState) -> None:
        self.hub = hub
        self._held: dict[str, Reservation] = {}

    @property
    def open_reservations(self) -> int:
        return len(self._held)

    def reserve(self, request_id: str, user_id: int, key_id: int | None, amount_nanos: int,
                *, jwt: bool = False) -> Deferred[Reservation]:
        """Hold ``amount_nanos`` or fail with ``PaymentRequired`` (402) / ``WalletUnavailable``."""
        return ensureDeferred(self._reserve(request_id, user_id, None if jwt else key_id,
                                            max(0, amount_nanos)))

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
        return reservation

    def release(self, reservation: Reservation) -> None:
        """Give a reservation back (idempotent)."""
        if not reservation.held:
            return
        reservation.held = False
        if self._held.get(reservation.request_id) is reservation:
            del self._held[reservation.request_id]
            self.hub.tell("give_back", reservation.request_id)

    def settling(self, reservation: Reservation | None, user_id: int, key_id: int | None,
                 cost_nanos: int) -> SettlingToken:
        """A settlement was queued: its reservation becomes a queued debit of ``cost``."""
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
        self.hub.tell("settled", token.ref, charged)

    def forget_user(self, user_id: int) -> None:
        self.hub.tell("forget", "user", user_id)

    def forget_key(self, key_id: int) -> None:
        self.hub.tell("forget", "key", key_id)

    def forget_all_keys(self) -> None:
        self.hub.tell("forget", "all-keys", 0)

    def forget_all_users(self) -> None:
        self.hub.tell("forget", "all-users", 0)

    def stop(self) -> Deferred[None]:
        """Fires once the hub handled every message sent so far."""
        d = self.hub.barrier()
        d.addErrback(lambda _: None)
        return d
