"""What a meta-model call reserves: the worst case over every model its program can reach.

Admission must hold enough for whichever model the program may pick (console contract §6.3.1),
so a call reserves the largest amount over every candidate of every reachable model -- and, in
a ``parallel`` or ``judge`` program, the sum of the calls it makes.  Pricing twenty candidates
on every request would cost far more than evaluating the program, so the candidates a caller
can reach are priced once per catalog snapshot and reduced to the few that can be the dearest:
with flat token prices, a candidate whose input and output prices are both at most another's
never costs more, whatever the token counts (``dearest``).  The kept ones become a
``ReserveRule`` (exact integer arithmetic), cached the same way, so a request pays only for its
token counts.  A new snapshot -- a meta-model edit, a price change, a model disabled -- starts
with an empty cache.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable, Sequence
from decimal import Decimal
from typing import Any

from gateway.billing.cost import QUOTA_TOKENS
from gateway.billing.estimate_reserve import reserve_amount_nanos
from gateway.catalog.snapshot import CatalogSnapshot
from gateway.metamodels.compiled import MetaModel
from gateway.metamodels.worst_case import synthesis_input, worst_case
from gateway.metering import Priced, price
from gateway.v1.call import routing_inputs
from gateway.v1.reserve_rule import ReserveRule

#: per catalog snapshot: (model or meta name, user, groups, key channels, mode) -> the
#: candidates that can be the dearest, and their ``ReserveRule`` (None: none reachable); both
#: dropped with the snapshot they were computed on
_DEAREST: weakref.WeakKeyDictionary[
    CatalogSnapshot, dict[tuple[Any, ...], Any]] = weakref.WeakKeyDictionary()
_DEAREST_PER_SNAPSHOT = 50_000
#: the snapshot the last request used and its entry of ``_DEAREST`` (most requests run on the
#: same snapshot: this skips making a weak reference per lookup; it keeps at most one
#: replaced snapshot alive until the next request)
_LAST: list[Any] = [None, {}]


def _flat(priced: Priced) -> tuple[Decimal, Decimal] | None:
    """Input and output price x multipliers when the price is flat per token (else None)."""
    prices = priced.prices
    if prices.tiers or prices.quota_type != QUOTA_TOKENS:
        return None
    factor = priced.effective.group_multiplier * priced.effective.user_channel_multiplier
    return prices.input * factor, prices.output * factor


def dearest(options: Iterable[Priced]) -> tuple[Priced, ...]:
    """``options`` without those another one always costs at least as much as (the Pareto
    front of flat prices; tiered or per-call prices are always kept)."""
    kept: list[Priced] = []
    flat: list[tuple[Decimal, Decimal, Priced]] = []
    for option in options:
        pair = _flat(option)
        if pair is None:
            kept.append(option)
        else:
            flat.append((pair[0], pair[1], option))
    flat.sort(key=lambda item: (-item[0], -item[1]))
    best_output: Decimal | None = None
    for input_price, output_price, option in flat:
        del input_price  # sorted by it, descending: only a higher output price can matter
        if best_output is None or output_price > best_output:
            kept.append(option)
            best_output = output_price
    return tuple(kept)


_MISSING = object()


def _rule(options: tuple[Priced, ...]) -> ReserveRule | None:
    return ReserveRule(options) if options else None


class MetaReserve:
    """The reservation of one caller's meta-model calls on one catalog snapshot."""

    def __init__(self, snapshot: CatalogSnapshot, user_id: int, group_ids: Sequence[int],
                 key_channels: Sequence[int], mode: str) -> None:
        self.snapshot = snapshot
        self.user_id = user_id
        self.group_ids = tuple(group_ids)
        self.key_channels = tuple(key_channels)
        self.mode = mode
        last_snapshot, cache = _LAST
        if last_snapshot is not snapshot:
            cache = _DEAREST.get(snapshot)
            if cache is None:
                cache = _DEAREST[snapshot] = {}
            _LAST[:] = [snapshot, cache]
        self._cache = cache

    def _cached(self, name: str, build: Any) -> Any:
        key = (name, self.user_id, self.group_ids, self.key_channels, self.mode)
        found = self._cache.get(key, _MISSING)
        if found is _MISSING:
            found = build()
            if len(self._cache) < _DEAREST_PER_SNAPSHOT:
                self._cache[key] = found
        return found

    def model_rule(self, model: str) -> ReserveRule | None:
        """``model_options`` as a ``ReserveRule`` (None: unreachable)."""
        return self._cached("\0rule:" + model, lambda: _rule(self.model_options(model)))

    def program_rule(self, meta: MetaModel) -> ReserveRule | None:
        """``program_options`` as a ``ReserveRule`` (None: it reaches no model).  Cached by
        name only for the meta model this snapshot holds (a request that began on an older
        snapshot gets its own program's rule, uncached)."""
        if self.snapshot.meta_models.get(meta.model_name) is not meta:
            return _rule(self.program_options(meta))
        return self._cached("\0meta-rule:" + meta.model_name,
                            lambda: _rule(self.program_options(meta)))

    def model_options(self, model: str) -> tuple[Priced, ...]:
        """The dearest candidates of one model for this caller (empty: unreachable)."""
        def build() -> tuple[Priced, ...]:
            inputs = routing_inputs(self.snapshot, model, self.user_id, self.group_ids,
                                    self.key_channels)
            if inputs is None:
                return ()
            return dearest(price(c, self.snapshot, self.group_ids, self.mode)
                           for c in inputs.by_config.values())
        return self._cached(model, build)

    def program_options(self, meta: MetaModel) -> tuple[Priced, ...]:
        """The dearest candidates over every model a one-call program can reach (cached for
        the meta model this snapshot holds)."""
        def build() -> tuple[Priced, ...]:
            return dearest(option for model in meta.referenced
                           for option in self.model_options(model))
        if self.snapshot.meta_models.get(meta.model_name) is not meta:
            return build()
        return self._cached("\0meta:" + meta.model_name, build)

    def nanos(self, meta: MetaModel, input_tokens: int, max_output: int | None,
              default_output: int) -> int:
        """What a call of ``meta`` reserves: one call at the meta price (``meta`` mode), else
        the worst case over the models its program can reach (a synthesizer's input grows
        by every candidate answer)."""
        answer_tokens = max_output if max_output and max_output > 0 else default_output
        if meta.bills_meta:
            extra = synthesis_input(meta.program.root, answer_tokens) if meta.fans_out else 0
            return reserve_amount_nanos(meta.prices, input_tokens + extra, max_output,
                                        default_output_reserve=default_output)
        if not meta.fans_out:
            rule = self.program_rule(meta)
            return rule.nanos(input_tokens, max_output, default_output) if rule else 0

        def cost_of(model: str, extra_input: int) -> int | None:
            rule = self.model_rule(model)
            return rule.nanos(input_tokens + extra_input, max_output,
                              default_output) if rule else None

        return worst_case(meta.program.root, cost_of, answer_tokens)
