"""What the request path, the settler and the console need from a wallet, whichever one runs.

Two implementations: ``wallet.Wallets`` keeps reservations in this process's memory (one node,
the fast path) and ``shared_wallet.SharedWallets`` keeps them in Redis so that every node of a
scale-out deployment admits against the same numbers.  Both are wired by ``tap``; the callers
only see this protocol.
"""

from __future__ import annotations

from typing import Any, Protocol

from twisted.internet.defer import Deferred

from gateway.billing.wallet import Reservation


class WalletBook(Protocol):
    def reserve(self, request_id: str, user_id: int, key_id: int | None, amount_nanos: int,
                *, jwt: bool = False) -> Deferred[Reservation]:
        """Hold ``amount_nanos`` against the user's balance and the key's quota, or fail with
        a ``PaymentRequired`` (402)."""

    def release(self, reservation: Reservation) -> None:
        """Give a reservation back (idempotent)."""

    def settling(self, reservation: Reservation | None, user_id: int, key_id: int | None,
                 cost_nanos: int) -> Any:
        """A settlement was queued: the reservation becomes a pending debit of ``cost``.

        Returns a token for ``settled``; a shared wallet's token may have to be recorded before
        the settlement is written (see ``shared_wallet.recorded``).
        """

    def settled(self, token: Any, balance_after: int | None = None,
                spent_after: int | None = None, quota: int | None = None) -> None:
        """The write holding ``token`` committed with these numbers (or was abandoned)."""

    def forget_user(self, user_id: int) -> None:
        """Reload this user's balance on next use (reservations and pending debits stay)."""

    def forget_key(self, key_id: int) -> None:
        """Reload this key's quota and spent counter on next use."""

    def forget_all_keys(self) -> None:
        """Reload every key's numbers on next use."""
