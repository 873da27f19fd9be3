"""The most a meta-model request can cost: what its reservation must hold (contract §6.3.1).

A ``route`` or ``switch`` ends in one of its branches, so it costs at most its dearest branch;
a ``parallel`` calls every model (and the synthesizer), so it costs their sum; a ``judge`` asks
its model and then takes one branch of its route.  ``cost_of(model)`` prices one call of a
model (the gateway gives its worst case over that model's candidates; None: unreachable, so
never called).
"""

from __future__ import annotations

from collections.abc import Callable

from gateway.metamodels.program import Action, Call, Judge, Parallel, Route, Switch

CostOf = Callable[[str], int | None]


def worst_case(action: Action, cost_of: CostOf) -> int:
    """The largest amount (nano-units) ``action`` can cost; 0 when it can reach no model."""
    if isinstance(action, Call):
        return cost_of(action.model) or 0
    if isinstance(action, Route):
        return max((worst_case(b.action, cost_of) for b in action.branches), default=0)
    if isinstance(action, Switch):
        return max((worst_case(b.action, cost_of) for b in action.branches), default=0)
    if isinstance(action, Parallel):
        total = sum(cost_of(call.model) or 0 for call in action.calls)
        if action.synthesize is not None:
            total += cost_of(action.synthesize) or 0
        return total
    assert isinstance(action, Judge)
    return (cost_of(action.model) or 0) + worst_case(action.route, cost_of)
