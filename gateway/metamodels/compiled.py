"""A meta model as the gateway holds it: the stored record with its program parsed once.

The catalog snapshot keeps one ``MetaModel`` per enabled meta model, so a request never parses
source: it runs the program compiled into closures (``resolver``, one per program version).
Everything a request needs to decide the billing mode, the meta price set and the listings is
precomputed here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from gateway.billing.cost import PriceSet
from gateway.billing.money import from_nanos
from gateway.metamodels.checks import conditions
from gateway.metamodels.evaluate import actions, referenced_models
from gateway.metamodels.parser import parse
from gateway.metamodels.program import Judge, Parallel, Program
from gateway.metamodels.resolver import Resolver

ACTUAL, META = "actual", "meta"


@dataclass(frozen=True)
class MetaModel:
    id: int
    #: the public model name clients send
    model_name: str
    name: str
    description: str
    provider: str
    provider_name: str
    provider_icon_url: str
    expose_referenced_models: bool
    #: ``actual`` (the resolved model's prices) or ``meta`` (``prices`` below)
    billing_mode: str
    #: the meta model's own per-1M prices (all zero in ``actual`` mode)
    prices: PriceSet
    program: Program
    #: every model name the program can call, in order of first appearance
    referenced: tuple[str, ...]
    #: every variable a condition reads (the account ones cost a lookup, so only when read)
    variables: frozenset[str]
    #: whether a ``parallel`` or ``judge`` makes the program call more than one model
    fans_out: bool = False
    #: ``program`` compiled: what a request evaluates (``evaluate.resolve``'s results)
    resolver: Resolver = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "resolver", Resolver(self.program.root))

    @property
    def bills_meta(self) -> bool:
        return self.billing_mode == META

    def listed_prices(self) -> dict[str, Decimal] | None:
        """The prices listings show: its own in ``meta`` mode, none (``null``) in ``actual``."""
        if not self.bills_meta:
            return None
        return {"input_price": self.prices.input, "output_price": self.prices.output,
                "cached_input_price": self.prices.cached_input}


def compile_meta(row: Mapping[str, Any]) -> MetaModel:
    """A ``meta_models`` row -> ``MetaModel``; raises ``ValueError`` when its source does not
    parse (the admin routes never store such a row, so that means a hand-edited database)."""
    program = parse(row["dsl"])
    mode = META if row["billing_mode"] == META else ACTUAL
    prices = PriceSet(
        input=from_nanos(int(row["input_price_nanos"] or 0)),
        output=from_nanos(int(row["output_price_nanos"] or 0)),
        cached_input=from_nanos(int(row["cached_input_price_nanos"] or 0)),
    ) if mode == META else PriceSet()
    return MetaModel(
        id=int(row["id"]), model_name=row["model_name"], name=row["name"],
        description=row["description"] or "", provider=row["provider"] or "meta",
        provider_name=row["provider_name"] or "Meta Module",
        provider_icon_url=row["provider_icon_url"] or "",
        expose_referenced_models=bool(row["expose_referenced_models"]),
        billing_mode=mode, prices=prices, program=program,
        referenced=tuple(referenced_models(program)),
        variables=frozenset(condition.left for condition, _ in conditions(program.root)),
        fans_out=any(isinstance(action, (Parallel, Judge)) for action in actions(program.root)),
    )
