"""The most a meta-model request can cost: what its reservation must hold (contract §6.3.1).

A ``route`` or ``switch`` ends in one of its branches, so it costs at most its dearest branch;
a ``parallel`` calls every model (and the synthesizer), so it costs their sum; a ``judge`` asks
its model and then takes one branch of its route.  A synthesizer reads the client's request
plus every candidate answer, so its input may grow by one answer (``answer_tokens``) per call.
``cost_of(model, extra_input_tokens)`` prices one call of a model (the gateway gives its worst
case over that model's candidates; None: unreachable, so never called).
"""

from __future__ import annotations

from collections.abc import Callable

from gateway.metamodels.program import Action, Call, Judge, Parallel, Route, Switch

CostOf = Callable[[str, int], int | None]


def worst_case(action: Action, cost_of: CostOf, answer_tokens: int = 0) -> int:
    """The largest amount (nano-units) ``action`` can cost; 0 when it can reach no model."""
    if isinstance(action, Call):
        return cost_of(action.model, 0) or 0
    if isinstance(action, (Route, Switch)):
        return max((worst_case(b.action, cost_of, answer_tokens) for b in action.branches),
                   default=0)
    if isinstance(action, Parallel):
        total = sum(cost_of(call.model, 0) or 0 for call in action.calls)
        if action.synthesize is not None:
            total += cost_of(action.synthesize, len(action.calls) * answer_tokens) or 0
        return total
    assert isinstance(action, Judge)
    return (cost_of(action.model, 0) or 0) + worst_case(action.route, cost_of, answer_tokens)


def synthesis_input(action: Action, answer_tokens: int) -> int:
    """The most input tokens a synthesizer may get on top of the client's request (0 when
    the program has no ``synthesize``)."""
    if isinstance(action, Parallel):
        return len(action.calls) * answer_tokens if action.synthesize is not None else 0
    if isinstance(action, (Route, Switch)):
        return max((synthesis_input(b.action, answer_tokens) for b in action.branches),
                   default=0)
    if isinstance(action, Judge):
        return synthesis_input(action.route, answer_tokens)
    return 0
