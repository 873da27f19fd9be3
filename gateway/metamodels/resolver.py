"""A meta-model program compiled into closures: ``evaluate.resolve`` without the tree walk.

``evaluate.resolve`` re-reads the program's nodes on every request: which operator, which
literal kind, the switch's running weights, the regular expression's cache.  None of that
changes between requests, so ``Resolver`` decides it once per program version (the catalog
snapshot keeps it on its ``MetaModel``): each condition becomes a closure
specialised to its operator and literal, each ``route`` a tuple of (test, next step), each
``switch`` its precomputed span and cumulative weights.  The results -- the step, the error
and its message, the number of draws -- are ``evaluate.resolve``'s, which stays the reference
(the tests compare both over generated programs).

Variables are read with ``variables[name]``, so a mapping that computes a value on first
access (``__missing__``) is asked only for what the branches actually test.
"""

from __future__ import annotations

import operator as operator_module
import re
from collections.abc import Callable, Mapping
from decimal import Decimal
from typing import Any, TypeAlias

from gateway.metamodels.evaluate import (
    ORDERING,
    EvaluationError,
    Step,
    _kind,
    compiled,
    resolve,
)
from gateway.metamodels.program import Action, Condition, Route, Switch

Variables: TypeAlias = Mapping[str, Any]
Draw: TypeAlias = Callable[[], float]
#: a compiled condition: whether it holds for the variables (raises ``EvaluationError``)
Test: TypeAlias = Callable[[Variables], bool]
#: a compiled route or switch: the step it leads to
Resolve: TypeAlias = Callable[[Variables, Draw], Step]

_NUMBER_TYPES = (int, Decimal)


def _equality(name: str, operator: str, right: Any) -> Test:
    kind = _kind(right)
    negate = operator == "!="
    unknown = f"Unknown variable: {name}"

    if kind == "number":
        def test(variables: Variables) -> bool:
            try:
                left = variables[name]
            except KeyError:
                raise EvaluationError(unknown) from None
            same = (left.__class__ is Decimal or (
                not isinstance(left, bool) and isinstance(left, _NUMBER_TYPES))) and bool(
                left == right)
            return same is not negate
    elif kind == "bool":
        def test(variables: Variables) -> bool:
            try:
                left = variables[name]
            except KeyError:
                raise EvaluationError(unknown) from None
            return (isinstance(left, bool) and left == right) is not negate
    else:
        def test(variables: Variables) -> bool:
            try:
                left = variables[name]
            except KeyError:
                raise EvaluationError(unknown) from None
            if left.__class__ is str:
                same = bool(left == right)
            else:
                same = _kind(left) == "string" and bool(left == right)
            return same is not negate
    return test


def _ordering(name: str, operator: str, right: Any) -> Test:
    message = f"Operator {operator} requires number operands"
    unknown = f"Unknown variable: {name}"
    if _kind(right) != "number":
        def refused(variables: Variables) -> bool:
            try:
                variables[name]
            except KeyError:
                raise EvaluationError(unknown) from None
            raise EvaluationError(message)
        return refused
    compare = {"<": operator_module.lt, "<=": operator_module.le, ">": operator_module.gt,
               ">=": operator_module.ge}[operator]

    def test(variables: Variables) -> bool:
        try:
            left = variables[name]
        except KeyError:
            raise EvaluationError(unknown) from None
        if left.__class__ is not Decimal and (
                isinstance(left, bool) or not isinstance(left, _NUMBER_TYPES)):
            raise EvaluationError(message)
        return bool(compare(left, right))
    return test


def _text(name: str, operator: str, right: Any) -> Test:
    message = f"Operator {operator} requires string operands"
    unknown = f"Unknown variable: {name}"
    if not isinstance(right, str):
        def refused(variables: Variables) -> bool:
            try:
                variables[name]
            except KeyError:
                raise EvaluationError(unknown) from None
            raise EvaluationError(message)
        return refused
    check: Callable[[str], bool]
    if operator == "contains":
        def check(left: str) -> bool:
            return right in left
    elif operator == "not_contains":
        def check(left: str) -> bool:
            return right not in left
    elif operator == "starts_with":
        check = lambda left: left.startswith(right)  # noqa: E731
    elif operator == "ends_with":
        check = lambda left: left.endswith(right)  # noqa: E731
    else:
        check = _matcher(right)

    def test(variables: Variables) -> bool:
        try:
            left = variables[name]
        except KeyError:
            raise EvaluationError(unknown) from None
        if not isinstance(left, str):
            raise EvaluationError(message)
        return check(left)
    return test


def _matcher(pattern: str) -> Callable[[str], bool]:
    try:
        search = compiled(pattern).search
    except re.error as exc:
        invalid = EvaluationError(f"Invalid regular expression {pattern!r}: {exc}")

        def refused(left: str) -> bool:
            raise EvaluationError(str(invalid))
        return refused
    return lambda left: search(left) is not None


def compile_condition(condition: Condition) -> Test:
    """``evaluate.holds(condition, ...)`` as a closure over the condition's fixed parts."""
    name, operator, right = condition.left, condition.operator, condition.right.value
    if operator in ("==", "!="):
        return _equality(name, operator, right)
    if operator in ORDERING:
        return _ordering(name, operator, right)
    return _text(name, operator, right)


class Resolver:
    """One program's routes and switches compiled; ``resolve`` is ``evaluate.resolve``."""

    def __init__(self, root: Action) -> None:
        #: compiled routes and switches by node identity (the program outlives this object's
        #: use: both live on the same ``MetaModel``)
        self._compiled: dict[int, Resolve] = {}
        self._nodes: list[Action] = []  # keeps every compiled node alive, so ids stay unique
        self.root: Resolve = self._step(root)

    def resolve(self, action: Action, variables: Variables, draw: Draw) -> Step:
        """The step ``action`` (the root, or a ``judge``'s route) leads to."""
        compiled_action = self._compiled.get(id(action))
        if compiled_action is None:  # not a node of this program
            return resolve(action, variables, draw)
        return compiled_action(variables, draw)

    def _step(self, action: Action) -> Resolve:
        found = self._compiled.get(id(action))
        if found is not None:
            return found
        if isinstance(action, Route):
            built = self._route(action)
        elif isinstance(action, Switch):
            built = self._switch(action)
        else:
            def built(variables: Variables, draw: Draw, step: Step = action) -> Step:
                return step
            for nested in _judged_routes(action):
                self._step(nested)
        self._compiled[id(action)] = built
        self._nodes.append(action)
        return built

    def _route(self, route: Route) -> Resolve:
        branches: tuple[tuple[Test | None, Resolve], ...] = tuple(
            (None if b.condition is None else compile_condition(b.condition),
             self._step(b.action)) for b in route.branches)

        def resolve_route(variables: Variables, draw: Draw) -> Step:
            for test, then in branches:
                if test is None or test(variables):
                    return then(variables, draw)
            raise EvaluationError("route has no matching branch")
        return resolve_route

    def _switch(self, switch: Switch) -> Resolve:
        weighted = [(b.weight, self._step(b.action)) for b in switch.branches
                    if b.weight is not None]
        otherwise = next((self._step(b.action) for b in switch.branches if b.weight is None),
                         None)
        total = sum((weight for weight, _ in weighted), Decimal(0))
        if not weighted or total <= 0:
            def refused(variables: Variables, draw: Draw) -> Step:
                raise EvaluationError("switch requires at least one weighted branch")
            return refused
        span = Decimal(1) if otherwise is not None and total < 1 else total
        running = Decimal(0)
        bounds: list[tuple[Decimal, Resolve]] = []
        for weight, then in weighted:
            running += weight
            bounds.append((running, then))
        last = otherwise if otherwise is not None else weighted[-1][1]

        def resolve_switch(variables: Variables, draw: Draw) -> Step:
            point = Decimal(repr(draw())) * span
            for bound, then in bounds:
                if point < bound:
                    return then(variables, draw)
            return last(variables, draw)
        return resolve_switch


def _judged_routes(action: Action) -> tuple[Route, ...]:
    route = getattr(action, "route", None)
    return (route,) if isinstance(route, Route) else ()
