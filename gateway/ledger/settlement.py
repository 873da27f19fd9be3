"""Exactly-once settlement of requests, written to the database in group commits.

Why batches: one transaction per request caps throughput at the database's commit rate; the
settler instead queues settlements for ``batch_interval`` (a few milliseconds) and writes them
all in one transaction (``gateway/store/billing_writes.py``): wallet debits floored at zero,
ledger rows, API-key counters and usage-log rows together.  While a batch is being written the
next one accumulates, so batches grow with load (classic group commit).

Exactly once: a request id settled (or being settled) on this node returns the first result;
across restarts and retries the database decides -- a request whose usage-log row exists is
never applied again, and the ledger's unique ``(kind, ref)`` backs that up.  A failed batch is
retried with capped backoff; transient errors (lost connection, locks) retry until they pass,
other errors split the batch to isolate a bad record, and a single record that keeps failing
is abandoned with ``SettlementFailed`` (and logged) so it cannot stall everyone else's billing.

Crash window: reservations live only in memory and nothing is deducted before settlement, so
after a crash there are no open reservations to reconcile.  What a crash can lose is the
settlements queued or in flight and not yet committed -- at most ``batch_interval`` plus one
transaction's duration of served requests.  ``flush()`` (called on shutdown) closes that window
for an orderly stop.  The ``reservations`` table is not used.
"""

from __future__ import annotations

import collections
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from twisted.internet.defer import Deferred, succeed
from twisted.internet.interfaces import IDelayedCall, IReactorTime
from twisted.logger import Logger
from twisted.python.failure import Failure

from gateway.billing.cost import Cost
from gateway.billing.usage import Usage
from gateway.frozen_init import direct_init
from gateway.ledger.settlement_values import prepared_settlement
from gateway.ledger.wallet import Reservation, SettlingToken, WalletBook
from gateway.store.billing_writes import (
    NeedsConnection,
    is_transient,
    write_batch,
    write_batch_lean,
)
from gateway.store.pool import DBRunner
from gateway.store.second_texts import SecondTexts
from gateway.store.settlement_rows import PreparedSettlement

if TYPE_CHECKING:
    from gateway.observability.metrics import GatewayMetrics

log = Logger()


class SettlementFailed(Exception):
    """A settlement could not be written after every retry (it was logged and dropped)."""


@direct_init
@dataclass(frozen=True)
class SettlementRecord:
    """Everything the usage log keeps about one request, plus what it costs."""

    request_id: str
    user_id: int
    api_key_id: int | None = None
    #: None for a failure that costs nothing (still logged, at zero cost)
    cost: Cost | None = None
    usage: Usage = field(default_factory=Usage)
    #: True once the client has (part of) the answer: charge what is left, never refuse
    delivered: bool = True
    model_name: str = ""
    #: the meta model the client named (empty when it named a model)
    meta_model_name: str = ""
    endpoint: str = ""
    is_stream: bool = False
    status: int = 200
    error_message: str = ""
    #: admin-only detail of an upstream failure (the client saw only ``error_message``)
    upstream_status: int | None = None
    failure_reason: str = ""
    response_time_ms: int = 0
    first_response_time_ms: int = 0
    user_channel_id: int | None = None
    channel_id: int | None = None
    model_config_id: int | None = None
    prices: Mapping[str, Any] | None = None
    ip: str = ""
    user_agent: str = ""
    created_at: datetime | None = None

    @property
    def cost_nanos(self) -> int:
        return self.cost.cost_nanos if self.cost is not None else 0

    def row(self) -> dict[str, Any]:
        """The batch item for ``write_batch`` (usage-log columns plus billing inputs) as a
        dict; the settler builds its prepared form directly (``settlement_values``)."""
        u = self.usage.clamped()
        cost = self.cost
        return {
            "request_id": self.request_id, "user_id": self.user_id,
            "api_key_id": self.api_key_id, "cost_nanos": self.cost_nanos,
            "delivered": self.delivered, "user_channel_id": self.user_channel_id,
            "channel_id": self.channel_id, "model_config_id": self.model_config_id,
            "model_name": self.model_name, "meta_model_name": self.meta_model_name,
            "endpoint": self.endpoint,
            "is_stream": self.is_stream,
            "input_tokens": u.input, "output_tokens": u.output,
            "cached_input_tokens": u.cache_read, "cache_write_input_tokens": u.cache_write_5m,
            "cache_write_1h_input_tokens": u.cache_write_1h,
            "image_input_tokens": u.image_in, "image_output_tokens": u.image_out,
            "audio_input_tokens": u.audio_in, "audio_output_tokens": u.audio_out,
            "response_time_ms": self.response_time_ms,
            "first_response_time_ms": self.first_response_time_ms,
            "base_cost_nanos": cost.base_cost_nanos if cost else 0,
            "group_multiplier_nanos": cost.group_multiplier_nanos if cost else 10**9,
            "user_channel_multiplier_nanos": (
                cost.user_channel_multiplier_nanos if cost else 10**9),
            "prices": dict(self.prices) if self.prices is not None else None,
            "pricing_formula": cost.formula if cost else "",
            "status": self.status, "error_message": self.error_message,
            "upstream_status": self.upstream_status, "failure_reason": self.failure_reason,
            "ip": self.ip, "user_agent": self.user_agent,
            **({"created_at": self.created_at} if self.created_at is not None else {}),
        }


@direct_init
@dataclass(frozen=True)
class SettledCharge:
    """The outcome of one settlement (the same object for every repeat of a request id)."""

    request_id: str
    cost_nanos: int
    #: what the wallet actually paid (less than the cost when floored at zero; 0 when refused)
    charged_nanos: int
    balance_after_nanos: int | None
    #: set for an undelivered answer the wallet / key quota could not pay: answer 402
    refused: str | None = None
    #: True when the database already held this settlement (retry or restart)
    duplicate: bool = False


@dataclass(eq=False)
class _Item:
    record: SettlementRecord
    token: SettlingToken
    #: the record converted for the database on this (the reactor) thread, not in the batch
    prepared: PreparedSettlement
    waiters: list[Deferred[SettledCharge]] = field(default_factory=list)
    #: clock time it was queued (the request's end), for the settlement-lag histogram
    queued_at: float = 0.0


class Settler:
    """Queues settlements and writes them in group commits, one transaction at a time."""

    def __init__(self, db: DBRunner, clock: IReactorTime, wallets: WalletBook, *,
                 batch_interval: float = 0.005, max_batch: int = 500,
                 retry_base: float = 0.05, retry_cap: float = 5.0, split_after: int = 3,
                 give_up_after: int = 8, remember: int = 100_000) -> None:
        self.db = db
        self.clock = clock
        self.wallets = wallets
        self.batch_interval = batch_interval
        self.max_batch = max_batch
        self.retry_base = retry_base
        self.retry_cap = retry_cap
        self.split_after = split_after
        self.give_up_after = give_up_after
        self._queue: collections.deque[_Item] = collections.deque()
        self._inflight: dict[str, _Item] = {}
        self._done: collections.OrderedDict[str, SettledCharge] = collections.OrderedDict()
        self._remember = remember
        self._timer: IDelayedCall | None = None
        self._writing = False
        self._flush_waiters: list[Deferred[None]] = []
        #: ``created_at`` texts and hours, derived once per second (reactor thread only)
        self._times = SecondTexts()
        #: sizes of the most recent committed batches, and running totals (stats, tests)
        self.batch_sizes: collections.deque[int] = collections.deque(maxlen=1000)
        self.batches_committed = 0
        self.settlements_committed = 0
        #: set by the composition root when metrics are exposed (None: nothing is counted)
        self.metrics: GatewayMetrics | None = None

    def settle(self, reservation: Reservation | None,
               record: SettlementRecord) -> Deferred[SettledCharge]:
        """Replace ``reservation`` by the measured cost; exactly once per request id."""
        done = self._enqueue(reservation, record)
        if done is not None:
            return succeed(done)
        waiter: Deferred[SettledCharge] = Deferred()
        self._inflight[record.request_id].waiters.append(waiter)
        return waiter

    def settle_and_forget(self, reservation: Reservation | None,
                          record: SettlementRecord) -> None:
        """``settle`` for a caller that does not wait for the outcome (the /v1 path).

        Skips a Deferred and its callback per request; a settlement that fails for good is
        logged by the settler either way.
        """
        self._enqueue(reservation, record)

    def _enqueue(self, reservation: Reservation | None,
                 record: SettlementRecord) -> SettledCharge | None:
        """Queue ``record`` unless its request id is queued or settled already (the earlier
        outcome is returned for a settled one); a repeat's reservation is released."""
        if reservation is not None and (reservation.request_id != record.request_id
                                        or reservation.user_id != record.user_id):
            raise ValueError("reservation and record describe different requests")
        request_id = record.request_id
        done = self._done.get(request_id)
        if done is not None or request_id in self._inflight:
            if reservation is not None:
                self.wallets.release(reservation)
            return done
        token = self.wallets.settling(reservation, record.user_id, record.api_key_id,
                                      record.cost_nanos)
        item = _Item(record, token, prepared_settlement(record, self.db.dialect, self._times),
                     queued_at=self.clock.seconds() if self.metrics is not None else 0.0)
        self._inflight[request_id] = item
        self._queue.append(item)
        self._kick()
        return None

    def flush(self) -> Deferred[None]:
        """Fires once everything queued so far (and anything queued meanwhile) is committed."""
        if not self._queue and not self._writing:
            return succeed(None)
        waiter: Deferred[None] = Deferred()
        self._flush_waiters.append(waiter)
        self._kick()
        return waiter

    @property
    def queued(self) -> int:
        return len(self._queue)

    @property
    def uncommitted(self) -> int:
        """Settlements queued or being written, not yet committed."""
        return len(self._inflight)

    # --- the writer -------------------------------------------------------------------------

    def _kick(self) -> None:
        if self._writing:
            return
        if not self._queue:
            waiters, self._flush_waiters = self._flush_waiters, []
            for waiter in waiters:
                waiter.callback(None)
            return
        if len(self._queue) >= self.max_batch or self._flush_waiters:
            self._start()
        elif self._timer is None:
            self._timer = self.clock.callLater(self.batch_interval, self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        if not self._writing and self._queue:
            self._start()

    def _start(self) -> None:
        if self._timer is not None:
            if self._timer.active():
                self._timer.cancel()
            self._timer = None
        count = min(len(self._queue), self.max_batch)
        batch = [self._queue.popleft() for _ in range(count)]
        self._writing = True
        self._write(batch, 0)

    def _now(self) -> datetime:
        return datetime.fromtimestamp(self.clock.seconds(), UTC)

    def _write(self, batch: list[_Item], attempt: int) -> None:
        prepared = [item.prepared for item in batch]
        now = self._now()
        if self.db.dialect == "sqlite":
            # plain DB-API (billing_writes.write_batch_lean): less Python holding the GIL on
            # the database thread; a batch with a Core-written part runs through Core
            d = self.db.driver_transaction(write_batch_lean, prepared, now)
            d.addErrback(self._through_core, prepared, now)
        else:
            d = self.db.transaction(write_batch, prepared, now)
        d.addCallbacks(self._committed, self._failed, callbackArgs=(batch,),
                       errbackArgs=(batch, attempt))

    def _through_core(self, failure: Failure, prepared: list[PreparedSettlement],
                      now: datetime) -> Deferred[list[dict[str, Any]]]:
        failure.trap(NeedsConnection)
        return self.db.transaction(write_batch, prepared, now)

    def _committed(self, results: list[dict[str, Any]], batch: list[_Item]) -> None:
        self.batch_sizes.append(len(batch))
        self.batches_committed += 1
        self.settlements_committed += len(batch)
        metrics = self.metrics
        now = self.clock.seconds() if metrics is not None else 0.0
        for item, result in zip(batch, results, strict=True):
            if metrics is not None:
                record = item.record
                metrics.settled(record.endpoint, record.status, record.cost_nanos,
                                result["charged_nanos"], item.prepared.item,
                                result["duplicate"],
                                max(0.0, now - item.queued_at))
            self.wallets.settled(item.token, result["balance_after_nanos"],
                                 result["spent_after_nanos"], result["quota_nanos"],
                                 charged_nanos=result["charged_nanos"])
            charge = SettledCharge(
                request_id=item.record.request_id, cost_nanos=item.record.cost_nanos,
                charged_nanos=result["charged_nanos"],
                balance_after_nanos=result["balance_after_nanos"], refused=result["refused"],
                duplicate=result["duplicate"])
            self._finish(item, charge)
        self._writing = False
        if self._queue:
            self._start()  # items waited for the whole write already: go now
        else:
            self._kick()

    def _finish(self, item: _Item, outcome: SettledCharge | Failure) -> None:
        request_id = item.record.request_id
        self._inflight.pop(request_id, None)
        if isinstance(outcome, SettledCharge):
            self._done[request_id] = outcome
            while len(self._done) > self._remember:
                self._done.popitem(last=False)
        for waiter in item.waiters:
            if isinstance(outcome, SettledCharge):
                waiter.callback(outcome)
            else:
                waiter.errback(outcome)

    def _failed(self, failure: Failure, batch: list[_Item], attempt: int) -> None:
        transient = is_transient(failure.value)
        log.failure("settlement batch of {n} failed (attempt {a})", failure,
                    n=len(batch), a=attempt + 1)
        if not transient and attempt + 1 >= self.split_after and len(batch) > 1:
            half = len(batch) // 2
            for item in reversed(batch[half:]):
                self._queue.appendleft(item)
            self._write(batch[:half], 0)
            return
        if not transient and attempt + 1 >= self.give_up_after:
            item = batch[0]
            log.critical("settlement {id} abandoned after {a} attempts: {e}",
                         id=item.record.request_id, a=attempt + 1, e=failure.getErrorMessage())
            self.wallets.settled(item.token)
            if self.metrics is not None:
                self.metrics.settlement_failed()
            self._finish(item, Failure(SettlementFailed(failure.getErrorMessage())))
            self._writing = False
            self._kick()
            return
        delay = min(self.retry_cap, self.retry_base * (2 ** attempt))
        self.clock.callLater(delay, self._write, batch, attempt + 1)
