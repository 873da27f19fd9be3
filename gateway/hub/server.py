"""The supervisor's state hub: one ``MemoryState`` and one ``WalletAuthority`` for every worker.

``twistd lockgate --workers N`` without Redis still has to share rate-limit windows, counters,
claims, the invalidation bus and the money holds between its N processes (operations contract
§4 asks that of a fleet; DESIGN "Scale-out").  The supervisor already outlives every worker, so
it holds that state in memory -- the same objects one process uses alone -- and answers the
workers over a Unix socket (``gateway.hub.commands``).  A worker's connection is its identity:
when it closes (the worker exited or was killed) its money holds are given back at once, so a
dead worker's reservations never outlive it (contract §7 allows 60 s; this takes none).

A busy worker does not ask per request: it holds an allowance of the accounts it serves
(``WalletAuthority.grant``, ``gateway.hub.wallets``), and the hub recalls its free part over
the same connection (``commands.Recall``) when another worker's admission needs it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson
from twisted.internet.defer import Deferred, DeferredList, gatherResults, succeed
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

#: seconds a publisher waits at most for a worker to take a bus message (contract §4: 1 s)
DELIVERY_TIMEOUT = 1.0
#: seconds an admission waits at most for a worker to give back its free allowance
RECALL_TIMEOUT = 1.0


def _verdict(verdict: WindowVerdict) -> list[Any]:
    return [verdict.allowed, verdict.remaining, verdict.retry_after]


class HubProtocol(amp.AMP):
    """One worker's connection to the hub."""

    factory: HubFactory

    def connectionMade(self) -> None:
        super().connectionMade()
        self.owner = Owner(name=f"worker-connection-{id(self):x}", recall=self._recall)
        self.factory.connections.add(self)
        state, wallets, owner = self.factory.state, self.factory.wallets, self.owner
        #: operation name -> handler(*arguments) returning a value or a Deferred
        self.operations: dict[str, Callable[..., Any]] = {
            "take_all": lambda keys, limits, window: state.take_all(
                list(zip(keys, limits, strict=True)), window).addCallback(_verdict),
            "hit": lambda key, limit, window: state.hit(key, limit, window).addCallback(
                _verdict),
            "incr": state.incr,
            "claim": state.claim,
            "release": state.release,
            "reserve": lambda request_id, user_id, key_id, amount: Deferred.fromCoroutine(
                wallets.reserve(owner, request_id, user_id, key_id, amount)),
            "give_back": lambda request_id: wallets.release(owner, request_id),
            "settling": lambda held, ref, user_id, key_id, cost: wallets.settling(
                owner, held, ref, user_id, key_id, cost),
            "settled": lambda ref, charged: wallets.settled(owner, ref, charged),
            "grant": lambda user_id, key_id, want: Deferred.fromCoroutine(
                wallets.grant(owner, user_id, key_id, want)),
            "give_back_allowance": lambda user_id, key_id, amount: wallets.give_back(
                owner, user_id, key_id, amount),
            "spent": lambda user_id, key_id, charged, covered: wallets.spent(
                owner, user_id, key_id, charged, covered),
            "forget": self._forget,
        }

    def connectionLost(self, reason: Failure = connectionDone) -> None:
        super().connectionLost(reason)
        self.factory.connections.discard(self)
        dropped = self.factory.wallets.owner_lost(self.owner)
        if dropped:
            log.warn("a worker left with {n} money holds or queued debits: given back, "
                     "its accounts reload from the database", n=dropped)

    def _recall(self, kind: str, ident: int) -> Deferred[list[list[Any]]]:
        """Ask this worker for the free part of its allowances on an account."""
        d = self.callRemote(commands.Recall, kind=kind, ident=ident)
        d.addTimeout(RECALL_TIMEOUT, self.factory.clock)
        return d.addCallback(lambda answer: orjson.loads(answer["returned"]))

    def _forget(self, kind: str, ident: int) -> None:
        wallets = self.factory.wallets
        if kind == "user":
            wallets.forget_user(ident)
        elif kind == "key":
            wallets.forget_key(ident)
        elif kind == "all-users":
            wallets.forget_all_users()
        elif kind == "all-keys":
            wallets.forget_all_keys()

    @commands.Batch.responder
    def batch(self, ops: bytes) -> Deferred[dict[str, Any]]:
        """Run the operations in order; answer once every one has an answer."""
        answers: list[Deferred[Any]] = []
        for name, *arguments in orjson.loads(ops):
            try:
                outcome = self.operations[name](*arguments)
            except Exception as exc:
                log.failure("hub operation {name} failed", name=name)
                outcome = {"error": f"{type(exc).__name__}: {exc}"}
            answer = outcome if isinstance(outcome, Deferred) else succeed(outcome)
            answers.append(answer.addErrback(self._failed, name))
        done: Deferred[list[Any]] = gatherResults(answers)
        return done.addCallback(lambda results: {"results": orjson.dumps(results)})

    @staticmethod
    def _failed(failure: Failure, name: str) -> dict[str, str]:
        log.failure("hub operation {name} failed", failure, name=name)
        return {"error": f"{failure.type.__name__}: {failure.getErrorMessage()}"}

    @commands.Publish.responder
    def publish(self, channel: str, message: bytes) -> Deferred[dict[str, Any]]:
        """Answered once every worker ran its subscribers (a console write is then seen by
        the next request on any worker), or after ``DELIVERY_TIMEOUT`` for a stuck one."""
        deliveries = [
            connection.callRemote(commands.Deliver, channel=channel, message=message)
            .addTimeout(DELIVERY_TIMEOUT, self.factory.clock)
            for connection in list(self.factory.connections)]
        done: Deferred[Any] = DeferredList(deliveries, consumeErrors=True)
        return done.addCallback(lambda _: {})

    @commands.Barrier.responder
    def barrier(self) -> dict[str, Any]:
        return {}


class HubFactory(Factory):
    """Serves the state hub; ``state`` and ``wallets`` are the shared objects."""

    protocol = HubProtocol  # type: ignore[assignment]

    def __init__(self, clock: IReactorTime, wallets: WalletAuthority) -> None:
        self.clock = clock
        self.state = MemoryState(clock)
        self.wallets = wallets
        self.connections: set[HubProtocol] = set()
        self.noisy = False
