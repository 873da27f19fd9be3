"""Resolving a meta-model program for one request: conditions, weighted draws, the next step.

``resolve`` walks ``route`` and ``switch`` nodes until it reaches what the gateway must do:
a ``Call`` (one real model), a ``Parallel`` fan-out or a ``Judge`` (ask a model, then resolve
its route with ``judge.answer`` set).  Comparisons follow contract §6.3's typing; numbers are
``Decimal`` so a threshold is exact.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from decimal import Decimal
from functools import lru_cache
from typing import Any, TypeAlias

from gateway.metamodels.program import (
    Action,
    Call,
    Condition,
    Judge,
    Parallel,
    Program,
    Route,
    Switch,
)

Step: TypeAlias = Call | Parallel | Judge
ORDERING = frozenset({"<", "<=", ">", ">="})
TEXT_OPERATORS = frozenset({"contains", "not_contains", "starts_with", "ends_with", "matches"})


class EvaluationError(ValueError):
    """The program cannot decide for this request (answered 400 in the family's shape)."""


@lru_cache(maxsize=512)
def compiled(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


def _kind(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    return "number" if isinstance(value, (int, Decimal)) else "string"


def holds(condition: Condition, variables: Mapping[str, Any]) -> bool:
    """Whether ``condition`` is true for ``variables``; raises ``EvaluationError``."""
    try:  # not ``in``: a lazy mapping computes a variable when it is first read
        left = variables[condition.left]
    except KeyError:
        raise EvaluationError(f"Unknown variable: {condition.left}") from None
    right, operator = condition.right.value, condition.operator
    if operator in ("==", "!="):
        same = _kind(left) == _kind(right) and left == right
        return same if operator == "==" else not same
    if operator in ORDERING:
        if _kind(left) != "number" or _kind(right) != "number":
            raise EvaluationError(f"Operator {operator} requires number operands")
        if operator == "<":
            return bool(left < right)
        if operator == "<=":
            return bool(left <= right)
        return bool(left > right) if operator == ">" else bool(left >= right)
    if not isinstance(left, str) or not isinstance(right, str):
        raise EvaluationError(f"Operator {operator} requires string operands")
    if operator == "contains":
        return right in left
    if operator == "not_contains":
        return right not in left
    if operator == "starts_with":
        return left.startswith(right)
    if operator == "ends_with":
        return left.endswith(right)
    try:
        return compiled(right).search(left) is not None
    except re.error as exc:
        raise EvaluationError(f"Invalid regular expression {right!r}: {exc}") from None


def _route(route: Route, variables: Mapping[str, Any]) -> Action:
    for branch in route.branches:
        if branch.condition is None or holds(branch.condition, variables):
            return branch.action
    raise EvaluationError("route has no matching branch")


def _switch(switch: Switch, draw: Callable[[], float]) -> Action:
    weighted = [(b.weight, b.action) for b in switch.branches if b.weight is not None]
    otherwise = next((b.action for b in switch.branches if b.weight is None), None)
    total = sum((weight for weight, _ in weighted), Decimal(0))
    if not weighted or total <= 0:
        raise EvaluationError("switch requires at least one weighted branch")
    # the remainder below 1 goes to otherwise; otherwise it is never drawn
    span = Decimal(1) if otherwise is not None and total < 1 else total
    point = Decimal(repr(draw())) * span
    running = Decimal(0)
    for weight, action in weighted:
        running += weight
        if point < running:
            return action
    return otherwise if otherwise is not None else weighted[-1][1]


def resolve(action: Action, variables: Mapping[str, Any], draw: Callable[[], float]) -> Step:
    """The step ``action`` leads to for this request (``draw``: uniform in [0, 1))."""
    while True:
        if isinstance(action, Route):
            action = _route(action, variables)
        elif isinstance(action, Switch):
            action = _switch(action, draw)
        else:
            return action


def actions(action: Action) -> Iterator[Action]:
    """``action`` and every action nested in it, depth first."""
    yield action
    if isinstance(action, Route):
        for branch in action.branches:
            yield from actions(branch.action)
    elif isinstance(action, Switch):
        for switch_branch in action.branches:
            yield from actions(switch_branch.action)
    elif isinstance(action, Parallel):
        yield from action.calls
    elif isinstance(action, Judge):
        yield from actions(action.route)


def referenced_models(program: Program) -> list[str]:
    """Every model name the program can call, in order of first appearance (no repeats)."""
    names: dict[str, None] = {}
    for action in actions(program.root):
        if isinstance(action, Call):
            names.setdefault(action.model)
        elif isinstance(action, Parallel):
            names.update(dict.fromkeys(call.model for call in action.calls))
            if action.synthesize is not None:
                names.setdefault(action.synthesize)
        elif isinstance(action, Judge):
            names.setdefault(action.model)
    return list(names)
