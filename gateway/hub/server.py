"""The supervisor's state hub: one ``MemoryState`` and one ``WalletAuthority`` for every worker.

``twistd lockgate --workers N`` without Redis still has to share rate-limit windows, counters,
claims, the invalidation bus and the money holds between its N processes (operations contract
§4 asks that of a fleet; DESIGN "Scale-out").  The supervisor already outlives every worker, so
it holds that state in memory -- the same objects one process uses alone -- and answers the
workers over a Unix socket (``gateway.hub.commands``).  A worker's connection is its identity:
when it closes (the worker exited or was killed) its money holds are given back at once, so a
dead worker's reservations never outlive it (contract §7 allows 60 s; this takes none).
"""

from __future__ import annotations

from typing import Any

from twisted.internet.defer import Deferred
from twisted.internet.interfaces import IReactorTime
from twisted.internet.protocol import Factory, connectionDone
from twisted.logger import Logger
from twisted.protocols import amp
from twisted.python.failure import Failure

from gateway.hub import commands
from gateway.ledger.wallet_authority import Owner, WalletAuthority
from gateway.state.memory import MemoryState
from gateway.state.protocol import WindowVerdict

log = Logger()


def _verdict(verdict: WindowVerdict) -> dict[str, Any]:
    return {"allowed": verdict.allowed, "remaining": verdict.remaining,
            "retry_after": verdict.retry_after}


class HubProtocol(amp.AMP):
    """One worker's connection to the hub."""

    factory: HubFactory

    def connectionMade(self) -> None:
        super().connectionMade()
        self.owner = Owner(name=f"worker-connection-{id(self):x}")
        self.factory.connections.add(self)

    def connectionLost(self, reason: Failure = connectionDone) -> None:
        super().connectionLost(reason)
        self.factory.connections.discard(self)
        dropped = self.factory.wallets.owner_lost(self.owner)
        if dropped:
            log.warn("a worker left with {n} money holds or queued debits: given back, "
                     "its accounts reload from the database", n=dropped)

    @commands.TakeAll.responder
    def take_all(self, keys: list[str], limits: list[int], window: int) -> Deferred[Any]:
        return self.factory.state.take_all(list(zip(keys, limits, strict=True)),
                                           window).addCallback(_verdict)

    @commands.Hit.responder
    def hit(self, key: str, limit: int, window: int) -> Deferred[Any]:
        return self.factory.state.hit(key, limit, window).addCallback(_verdict)

    @commands.Incr.responder
    def incr(self, key: str, amount: int) -> Deferred[Any]:
        return self.factory.state.incr(key, amount).addCallback(lambda v: {"value": v})

    @commands.Claim.responder
    def claim(self, key: str, ttl: int) -> Deferred[Any]:
        return self.factory.state.claim(key, ttl).addCallback(lambda ok: {"claimed": ok})

    @commands.Release.responder
    def release(self, key: str) -> Deferred[Any]:
        return self.factory.state.release(key).addCallback(lambda _: {})

    @commands.Publish.responder
    def publish(self, channel: str, message: bytes) -> dict[str, Any]:
        for connection in list(self.factory.connections):
            connection.callRemote(commands.Deliver, channel=channel, message=message)
        return {}

    @commands.Reserve.responder
    def reserve(self, request_id: str, user_id: int, key_id: int | None,
                amount: int) -> Deferred[Any]:
        d = Deferred.fromCoroutine(self.factory.wallets.reserve(
            self.owner, request_id, user_id, key_id, amount))
        return d.addCallback(lambda outcome: {"outcome": outcome})

    @commands.GiveBack.responder
    def give_back(self, request_id: str) -> dict[str, Any]:
        self.factory.wallets.release(self.owner, request_id)
        return {}

    @commands.Settling.responder
    def settling(self, held: str, ref: str, user_id: int, key_id: int | None,
                 cost: int) -> dict[str, Any]:
        self.factory.wallets.settling(self.owner, held, ref, user_id, key_id, cost)
        return {}

    @commands.Settled.responder
    def settled(self, ref: str, charged: int | None) -> dict[str, Any]:
        self.factory.wallets.settled(self.owner, ref, charged)
        return {}

    @commands.Forget.responder
    def forget(self, kind: str, ident: int) -> dict[str, Any]:
        wallets = self.factory.wallets
        if kind == "user":
            wallets.forget_user(ident)
        elif kind == "key":
            wallets.forget_key(ident)
        elif kind == "all-users":
            wallets.forget_all_users()
        elif kind == "all-keys":
            wallets.forget_all_keys()
        return {}

    @commands.Barrier.responder
    def barrier(self) -> dict[str, Any]:
        return {}


class HubFactory(Factory):
    """Serves the state hub; ``state`` and ``wallets`` are the shared objects."""

    protocol = HubProtocol  # type: ignore[assignment]

    def __init__(self, clock: IReactorTime, wallets: WalletAuthority) -> None:
        self.state = MemoryState(clock)
        self.wallets = wallets
        self.connections: set[HubProtocol] = set()
        self.noisy = False
