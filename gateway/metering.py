"""From a chosen candidate and measured usage to a settlement record (pure bookkeeping).

Keeps the /v1 function short: the price set a candidate bills with, the worst-case amount to
reserve over all attempts, the usage fallback when an upstream reported none (contract §10.3),
and the usage-log record of every exit.
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from functools import cached_property

from gateway.billing.cost import DIMENSIONS, PriceSet, billing_tiers, compute_cost
from gateway.billing.estimate_reserve import reserve_amount_nanos
from gateway.billing.pricing import EffectivePrices
from gateway.billing.reserve_linear import LinearForm, linear_form, linear_nanos
from gateway.billing.usage import Usage
from gateway.catalog.snapshot import Candidate, CatalogSnapshot
from gateway.ledger.settlement import SettlementRecord


@dataclass(frozen=True)
class Priced:
    candidate: Candidate
    effective: EffectivePrices
    prices: PriceSet

    @cached_property
    def reserve_form(self) -> LinearForm | None:
        """The reservation's integer form (``reserve_linear``), once per priced candidate:
        priced candidates are cached per catalog snapshot, so admission skips ``Decimal``."""
        return linear_form(self.prices, self.effective.group_multiplier,
                           self.effective.user_channel_multiplier)


#: priced candidates per catalog snapshot: a snapshot is immutable and replaced wholesale on
#: reload, so its prices can be computed once per (config, groups, mode) and dropped with it
_PRICED: weakref.WeakKeyDictionary[CatalogSnapshot, dict[tuple[int, tuple[int, ...], str],
                                                         Priced]] = weakref.WeakKeyDictionary()
_PRICED_PER_SNAPSHOT = 50_000


def price(candidate: Candidate, snapshot: CatalogSnapshot, group_ids: Sequence[int],
          mode: str) -> Priced:
    cache = _PRICED.get(snapshot)
    if cache is None:
        cache = _PRICED[snapshot] = {}
    key = (candidate.config.id, tuple(group_ids), mode)
    found = cache.get(key)
    if found is None or found.candidate is not candidate:
        found = _price(candidate, snapshot, group_ids, mode)
        if len(cache) < _PRICED_PER_SNAPSHOT:
            cache[key] = found
    return found


def _price(candidate: Candidate, snapshot: CatalogSnapshot, group_ids: Sequence[int],
           mode: str) -> Priced:
    effective = candidate.prices_for(snapshot.group_rates(group_ids), mode)
    model = candidate.model
    tiers = {dim: billing_tiers(model.tiers.get(col)) for dim, col in DIMENSIONS.items()}
    prices = PriceSet(
        **{dim: effective.base.get(col, Decimal(0)) for dim, col in DIMENSIONS.items()},
        tiers={dim: t for dim, t in tiers.items() if t},
        quota_type=model.quota_type if model.quota_type in (0, 1) else 0,
    )
    return Priced(candidate, effective, prices)


def reserve_for(priced: Sequence[Priced], input_tokens: int, max_output: int | None,
                default_output: int) -> int:
    """The largest worst-case cost over every candidate the request may be sent to
    (``reserve_amount_nanos`` of each; flat prices through their exact integer form)."""
    output = max_output if max_output and max_output > 0 else default_output
    best: int | None = None
    for p in priced:
        form = p.reserve_form
        amount = linear_nanos(form, input_tokens, output) if form is not None else None
        if amount is None:
            amount = reserve_amount_nanos(
                p.prices, input_tokens, max_output, default_output_reserve=default_output,
                group_multiplier=p.effective.group_multiplier,
                user_channel_multiplier=p.effective.user_channel_multiplier)
        if best is None or amount > best:
            best = amount
    if best is None:
        raise ValueError("reserve_for needs at least one priced candidate")
    return best


def fallback_usage(input_tokens: int, output_tokens: int) -> Usage:
    return Usage(input=input_tokens, output=output_tokens, estimated=True)


@dataclass
class RequestLog:
    """What the pipeline learns about a call as it goes (who, what, which candidate, when);
    how the call ended -- status, usage, whether it bills -- comes from its outcome
    (``gateway.v1.outcome``), which turns both into the settlement record at the end."""

    request_id: str
    user_id: int
    api_key_id: int | None
    endpoint: str
    started: float
    ip: str
    user_agent: str
    model_name: str = ""
    #: the meta model the client named, when one resolved this call (console contract §6.3)
    meta_model_name: str = ""
    is_stream: bool = False
    priced: Priced | None = None
    first_byte_at: float | None = None
    #: the last failed attempt's upstream status and reason (``gateway.upstream_failure``)
    upstream_status: int | None = None
    failure_reason: str = ""

    def record(self, now: float, created_at: datetime, *, status: int, error_message: str,
               usage: Usage | None, billed: bool) -> SettlementRecord:
        """The row and charge of this call: ``billed`` -- what the outcome decided -- charges
        ``usage`` at the chosen candidate's prices; otherwise the row costs nothing."""
        cost = None
        candidate = self.priced.candidate if self.priced else None
        if billed and self.priced is not None and usage is not None:
            cost = compute_cost(usage, self.priced.prices,
                                self.priced.effective.group_multiplier,
                                self.priced.effective.user_channel_multiplier)
        first = self.first_byte_at if self.first_byte_at is not None else now
        return SettlementRecord(
            request_id=self.request_id, user_id=self.user_id, api_key_id=self.api_key_id,
            cost=cost, usage=usage or Usage(), delivered=billed,
            model_name=self.model_name, meta_model_name=self.meta_model_name,
            endpoint=self.endpoint, is_stream=self.is_stream,
            status=0 if status < 400 else status,
            error_message=error_message[:512],
            upstream_status=self.upstream_status, failure_reason=self.failure_reason[:512],
            response_time_ms=int((now - self.started) * 1000),
            first_response_time_ms=int((first - self.started) * 1000),
            user_channel_id=candidate.user_channel.id if candidate else None,
            channel_id=candidate.channel.id if candidate else None,
            model_config_id=candidate.config.id if candidate else None,
            prices=self.priced.prices.as_json() if self.priced else None,
            ip=self.ip, user_agent=self.user_agent[:512], created_at=created_at,
        )
