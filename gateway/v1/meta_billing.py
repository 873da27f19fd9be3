"""The price set a meta model's ``meta`` billing mode bills with (console contract §6.3).

In ``meta`` mode the client pays the meta model's own input/output/cached prices -- no group or
user-channel multiplier, whatever candidate served it -- while the upstream call still goes to
the resolved model's candidate (which the usage log keeps).
"""

from __future__ import annotations

from decimal import Decimal

from gateway.billing.pricing import EffectivePrices
from gateway.metamodels.compiled import MetaModel
from gateway.metering import Priced

ONE = Decimal(1)


def meta_priced(meta: MetaModel, priced: Priced) -> Priced:
    """``priced`` as ``meta`` bills it: unchanged in ``actual`` mode."""
    if not meta.bills_meta:
        return priced
    base = {"input_price": meta.prices.input, "output_price": meta.prices.output,
            "cached_input_price": meta.prices.cached_input}
    effective = EffectivePrices(base=base, group_multiplier=ONE, user_channel_multiplier=ONE,
                                prices=dict(base))
    return Priced(priced.candidate, effective, meta.prices)
