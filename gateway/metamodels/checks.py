"""Validation of a parsed meta-model program, every problem in contract §6.3's order.

After parsing: the executable checks (what a ``plan`` object could get wrong that source
cannot, and the fan-out bound), then the variables (unknown names and operator typing are
refused here, not at run time: console contract §7.17), then the referenced models.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Literal

from gateway.metamodels.evaluate import ORDERING, TEXT_OPERATORS, actions, referenced_models
from gateway.metamodels.program import Action, Condition, Judge, Parallel, Program, Route, Switch
from gateway.metamodels.variables import JUDGE_ANSWER, KINDS, NUMBER, STRING

MAX_PARALLEL_CALLS = 8
#: what a referenced name is: a global model, a meta model, or nothing
ModelKind = Literal["model", "meta", None]


def _executable(program: Program) -> Iterator[str]:
    for action in actions(program.root):
        if isinstance(action, Switch):
            weights = [b.weight for b in action.branches if b.weight is not None]
            if any(weight <= 0 for weight in weights):
                yield "switch weight must be positive"
            if not weights:
                yield "switch requires at least one weighted branch"
            if len(action.branches) - len(weights) > 1:
                yield "switch cannot have duplicate otherwise branches"
        elif isinstance(action, Route | Judge):
            route = action.route if isinstance(action, Judge) else action
            otherwise = [b for b in route.branches if b.condition is None]
            if not otherwise:
                yield "route requires an otherwise branch"
            elif len(otherwise) > 1:
                yield "duplicate otherwise branch"
        elif isinstance(action, Parallel):
            if not action.calls:
                yield "parallel requires at least one call"
            if len(action.calls) > MAX_PARALLEL_CALLS:
                yield f"parallel accepts at most {MAX_PARALLEL_CALLS} calls"


def conditions(action: Action, in_judge: bool = False) -> Iterator[tuple[Condition, bool]]:
    if isinstance(action, Judge):
        yield from conditions(action.route, True)
    elif isinstance(action, Route):
        for branch in action.branches:
            if branch.condition is not None:
                yield branch.condition, in_judge
            # a judge's route actions are resolved after the judge answered
            yield from conditions(branch.action, in_judge)
    elif isinstance(action, Switch):
        for switch_branch in action.branches:
            yield from conditions(switch_branch.action, in_judge)


def _variables(program: Program) -> Iterator[str]:
    for condition, in_judge in conditions(program.root):
        name = condition.left
        kind = STRING if (name == JUDGE_ANSWER and in_judge) else KINDS.get(name)
        if kind is None:
            yield f"Unknown variable: {name}"
            continue
        operator, right = condition.operator, condition.right
        if operator in ORDERING and (kind != NUMBER or right.kind != NUMBER):
            yield f"Operator {operator} requires number operands"
        elif operator in TEXT_OPERATORS and (kind != STRING or right.kind != STRING):
            yield f"Operator {operator} requires string operands"
        elif operator == "matches" and isinstance(right.value, str):
            try:
                re.compile(right.value)
            except re.error as exc:
                yield f"Invalid regular expression {right.value!r}: {exc}"


def _references(program: Program, name: str,
                lookup: Callable[[str], ModelKind]) -> Iterator[str]:
    for model in referenced_models(program):
        if model == name:
            yield "Meta model cannot reference itself"
        elif (kind := lookup(model)) == "meta":
            yield f"Meta model cannot reference another meta model yet: {model}"
        elif kind is None:
            yield f"Referenced model not found: {model}"


def problems(program: Program, *, name: str,
             lookup: Callable[[str], ModelKind]) -> list[str]:
    """Every problem of ``program`` (meta model ``name``), first one first; [] when valid."""
    return [*_executable(program), *_variables(program), *_references(program, name, lookup)]
