"""An immutable in-memory picture of the routing catalog, with the indexes the gateway needs.

The gateway never reads catalog tables on the request path: it asks the current snapshot for
the candidates serving a model, whether a user may use a user channel, and what they pay.  A
snapshot is built from rows read in one transaction (``loader.py``) and replaced wholesale when
an admin write announces a change, so a request always sees one consistent catalog.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from types import MappingProxyType
from typing import Any

from gateway.billing.pricing import EffectivePrices, GroupRate, effective_prices
from gateway.metamodels.compiled import MetaModel


@dataclass(frozen=True)
class Group:
    id: int
    name: str
    multiplier: Decimal


@dataclass(frozen=True)
class UserChannel:
    id: int
    name: str
    description: str
    multiplier: Decimal
    routing_algorithm: str
    enabled: bool
    rate_limit_enabled: bool
    rate_limit_requests_per_minute: int
    rate_limit_burst: int
    #: access grants; both empty = open to everyone
    allowed_group_ids: frozenset[int] = frozenset()
    allowed_user_ids: frozenset[int] = frozenset()

    @property
    def restricted(self) -> bool:
        return bool(self.allowed_group_ids or self.allowed_user_ids)

    def visible_to(self, user_id: int, group_ids: Iterable[int]) -> bool:
        """Open when there are no grants; else the user or one of their active groups is granted."""
        if not self.restricted:
            return True
        return user_id in self.allowed_user_ids or any(
            group_id in self.allowed_group_ids for group_id in group_ids)


@dataclass(frozen=True)
class Channel:
    id: int
    user_channel_id: int | None
    name: str
    type: str
    base_url: str
    api_key: str
    priority: int
    weight: int
    enabled: bool
    consecutive_failures: int = 0
    auto_disabled_at: Any = None
    last_health_status: str = "pending"
    #: group id -> multiplier override (only non-zero rows matter)
    group_multipliers: Mapping[int, Decimal] = field(default_factory=dict)


@dataclass(frozen=True)
class Model:
    id: int
    model_name: str
    display_name: str
    provider: str
    provider_icon_url: str
    quota_type: int
    enabled: bool
    #: all nine price dimensions (per 1M tokens for quota type 0)
    prices: Mapping[str, Decimal]
    tiers: Mapping[str, Any]
    video_billing_config: Any


@dataclass(frozen=True)
class ModelConfig:
    id: int
    channel_id: int
    model_id: int
    upstream_model_name: str
    enabled: bool
    #: the five overridable dimensions; ``None`` inherits the global price
    price_overrides: Mapping[str, Decimal | None]
    group_multipliers: Mapping[int, Decimal] = field(default_factory=dict)


@dataclass(frozen=True)
class Candidate:
    """One way to serve a model: a config on a channel inside a user channel (all enabled)."""

    config: ModelConfig
    model: Model
    channel: Channel
    user_channel: UserChannel

    def prices_for(self, groups: Sequence[GroupRate], mode: str = "min") -> EffectivePrices:
        return effective_prices(
            self.model.prices, self.config.price_overrides, groups,
            self.config.group_multipliers, self.channel.group_multipliers,
            self.user_channel.multiplier, mode)

    @property
    def upstream_model(self) -> str:
        return self.config.upstream_model_name or self.model.model_name


def _sort_key(candidate: Candidate) -> tuple[int, int, int, int]:
    return (-candidate.channel.priority, -candidate.channel.weight, candidate.channel.id,
            candidate.config.id)


class CatalogSnapshot:
    """Read-only views over one load of the catalog."""

    def __init__(self, *, groups: Iterable[Group] = (), user_channels: Iterable[UserChannel] = (),
                 channels: Iterable[Channel] = (), models: Iterable[Model] = (),
                 configs: Iterable[ModelConfig] = (),
                 meta_models: Iterable[MetaModel] = ()) -> None:
        self.groups: Mapping[int, Group] = MappingProxyType({g.id: g for g in groups})
        self.user_channels: Mapping[int, UserChannel] = MappingProxyType(
            {uc.id: uc for uc in user_channels})
        self.channels: Mapping[int, Channel] = MappingProxyType({c.id: c for c in channels})
        self.models: Mapping[int, Model] = MappingProxyType({m.id: m for m in models})
        self.models_by_name: Mapping[str, Model] = MappingProxyType(
            {m.model_name: m for m in self.models.values()})
        self.configs: Mapping[int, ModelConfig] = MappingProxyType({c.id: c for c in configs})
        by_name: dict[str, list[Candidate]] = {}
        for config in self.configs.values():
            candidate = self._candidate(config)
            if candidate is not None:
                by_name.setdefault(candidate.model.model_name, []).append(candidate)
        self._candidates: Mapping[str, tuple[Candidate, ...]] = MappingProxyType(
            {name: tuple(sorted(found, key=_sort_key)) for name, found in by_name.items()})
        #: enabled meta models by public name (a disabled one is an unknown model)
        self.meta_models: Mapping[str, MetaModel] = MappingProxyType(
            {m.model_name: m for m in meta_models})
        exposed = {name for m in self.meta_models.values() if m.expose_referenced_models
                   for name in m.referenced}
        #: models left out of listings: referenced only by meta models that hide them
        self.hidden_models: frozenset[str] = frozenset(
            name for m in self.meta_models.values() if not m.expose_referenced_models
            for name in m.referenced if name not in exposed)

    def _candidate(self, config: ModelConfig) -> Candidate | None:
        model = self.models.get(config.model_id)
        channel = self.channels.get(config.channel_id)
        if model is None or channel is None or channel.user_channel_id is None:
            return None
        user_channel = self.user_channels.get(channel.user_channel_id)
        if user_channel is None:
            return None
        if not (config.enabled and model.enabled and channel.enabled and user_channel.enabled):
            return None
        if channel.auto_disabled_at is not None:
            return None  # auto-disabled (e.g. upstream 401): off on every node until recovered
        return Candidate(config=config, model=model, channel=channel, user_channel=user_channel)

    def candidates(self, model_name: str) -> tuple[Candidate, ...]:
        """Enabled candidates for a model, by channel priority desc, weight desc, id asc."""
        return self._candidates.get(normalize_model_name(model_name), ())

    def candidates_for(self, model_name: str, user_id: int, group_ids: Iterable[int],
                       user_channel_ids: Sequence[int] = ()) -> tuple[Candidate, ...]:
        """Gateway contract §5 step 2: the model's candidates in user channels the user may use,
        restricted to the key's ``user_channel_ids`` when it lists any (order as ``candidates``;
        splitting into failover groups by the key's order is routing's job)."""
        ids = list(group_ids)
        allowed = set(user_channel_ids)
        return tuple(
            c for c in self.candidates(model_name)
            if (not allowed or c.user_channel.id in allowed)
            and c.user_channel.visible_to(user_id, ids))

    def models_for(self, user_id: int, group_ids: Iterable[int],
                   user_channel_ids: Sequence[int] = ()) -> list[str]:
        """Sorted names of the models the user (and key) can reach (``/v1/models``)."""
        ids = list(group_ids)
        return [name for name in self.model_names()
                if self.candidates_for(name, user_id, ids, user_channel_ids)]

    def model_names(self) -> list[str]:
        """Names of every model reachable through at least one enabled candidate, sorted."""
        return sorted(self._candidates)

    def all_candidates(self) -> list[Candidate]:
        return [c for name in sorted(self._candidates) for c in self._candidates[name]]

    def group_rates(self, group_ids: Iterable[int]) -> list[GroupRate]:
        """Active group ids -> the rates pricing needs (unknown groups are skipped)."""
        return [GroupRate(g.id, g.multiplier) for g in
                (self.groups.get(group_id) for group_id in group_ids) if g is not None]

    def visible_user_channels(self, user_id: int, group_ids: Iterable[int]) -> list[UserChannel]:
        """Enabled user channels the user may use, sorted by name."""
        ids = list(group_ids)
        return sorted((uc for uc in self.user_channels.values()
                       if uc.enabled and uc.visible_to(user_id, ids)), key=lambda uc: uc.name)


def normalize_model_name(name: str) -> str:
    """Trim and drop a leading ``models/`` (gateway contract §5 step 1)."""
    name = name.strip()
    return name[len("models/"):] if name.startswith("models/") else name
