"""How meta models show in the model listings (console contract §0, "Meta models in listings").

``/v1/models``, ``/api/public/models``, ``/api/user/catalog`` and ``/api/pricing`` list every
enabled meta model by its public name, with its own prices in ``meta`` billing mode and ``null``
prices in ``actual`` mode (what a call costs then depends on the model the program picks).  A
model referenced only by meta models with ``expose_referenced_models: false`` is left out of
those listings, though it stays callable by name.  One place says this for all four routes.
"""

from __future__ import annotations

from collections.abc import Iterable
from decimal import Decimal

from gateway.billing.money import format_decimal
from gateway.catalog.snapshot import CatalogSnapshot
from gateway.metamodels.compiled import MetaModel


def listed_meta_models(snapshot: CatalogSnapshot) -> list[MetaModel]:
    """The enabled meta models, by public name."""
    return [snapshot.meta_models[name] for name in sorted(snapshot.meta_models)]


def shown(snapshot: CatalogSnapshot, names: Iterable[str]) -> list[str]:
    """``names`` without the models a meta model hides."""
    hidden = snapshot.hidden_models
    return [name for name in names if name not in hidden]


def meta_price_values(meta: MetaModel, names: Iterable[str],
                      scale: Decimal = Decimal(1)) -> dict[str, Decimal | None]:
    """Per price name: the meta model's own price x ``scale`` (``meta`` mode; 0 for the
    dimensions a meta model has no price for), or None (``actual`` mode)."""
    own = meta.listed_prices()
    if own is None:
        return dict.fromkeys(names)
    return {name: own.get(name, Decimal(0)) * scale for name in names}


def meta_price_strings(meta: MetaModel, names: Iterable[str], prefix: str = "",
                       scale: Decimal = Decimal(1)) -> dict[str, str | None]:
    """``meta_price_values`` spelled for the wire: decimal strings or ``null``."""
    return {prefix + name: None if value is None else format_decimal(value)
            for name, value in meta_price_values(meta, names, scale).items()}
