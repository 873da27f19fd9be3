"""Reading a ``plan`` object (the AST the API returns) back into a ``Program`` (contract D9).

An admin may send ``definition`` as the plan JSON instead of source; it is checked as strictly
as source (``PlanError`` names what is wrong) and then stored as rendered source.
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation
from typing import Any

from gateway.metamodels.parser import OPERATORS
from gateway.metamodels.program import (
    Action,
    Call,
    Condition,
    Judge,
    Literal,
    Option,
    Parallel,
    Program,
    Route,
    RouteBranch,
    Switch,
    SwitchBranch,
)

MAX_DEPTH = 32
IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*\Z")


class PlanError(ValueError):
    """The plan object is not a program; the message says where."""


def _object(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise PlanError(f"{where} must be an object")
    return value


def _string(value: Any, where: str) -> str:
    if not isinstance(value, str):
        raise PlanError(f"{where} must be a string")
    return value


def _identifier(value: Any, where: str) -> str:
    text = _string(value, where)
    if not IDENTIFIER.match(text):
        raise PlanError(f"{where} must be an identifier (letters, digits, _ and .)")
    return text


def _list(value: Any, where: str) -> list[Any]:
    if not isinstance(value, list):
        raise PlanError(f"{where} must be an array")
    return value


def _decimal(value: Any, where: str) -> Decimal:
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise PlanError(f"{where} must be a number")
    try:
        number = Decimal(str(value))
    except InvalidOperation:
        raise PlanError(f"{where} must be a number") from None
    if not number.is_finite() or number < 0:
        raise PlanError(f"{where} must be an unsigned number")
    return number


def _literal(value: Any, where: str) -> Literal:
    plan = _object(value, where)
    kind = plan.get("kind")
    if kind == "string":
        return Literal(_string(plan.get("string"), f"{where}.string"))
    if kind == "number":
        return Literal(_decimal(plan.get("number"), f"{where}.number"))
    if kind == "bool":
        flag = plan.get("bool")
        if not isinstance(flag, bool):
            raise PlanError(f"{where}.bool must be true or false")
        return Literal(flag)
    raise PlanError(f"{where}.kind must be string, number or bool")


def _route(value: Any, where: str, depth: int) -> Route:
    branches: list[RouteBranch] = []
    for i, item in enumerate(_list(value, where)):
        branch = _object(item, f"{where}[{i}]")
        action = _action(branch.get("action"), f"{where}[{i}].action", depth)
        if branch.get("otherwise") is True:
            branches.append(RouteBranch(action))
            continue
        condition = _object(branch.get("condition"), f"{where}[{i}].condition")
        operator = condition.get("operator")
        if operator not in OPERATORS:
            raise PlanError(f"{where}[{i}].condition.operator must be one of "
                            + ", ".join(sorted(OPERATORS)))
        branches.append(RouteBranch(action, Condition(
            _identifier(condition.get("left"), f"{where}[{i}].condition.left"), operator,
            _literal(condition.get("right"), f"{where}[{i}].condition.right"))))
    return Route(tuple(branches))


def _action(value: Any, where: str, depth: int = 0) -> Action:
    if depth > MAX_DEPTH:
        raise PlanError(f"{where}: actions nested deeper than {MAX_DEPTH} levels")
    plan = _object(value, where)
    kind = plan.get("kind")
    if kind == "call":
        return Call(_string(plan.get("model"), f"{where}.model"))
    if kind == "route":
        return _route(plan.get("routes"), f"{where}.routes", depth + 1)
    if kind == "switch":
        branches: list[SwitchBranch] = []
        for i, item in enumerate(_list(plan.get("switches"), f"{where}.switches")):
            branch = _object(item, f"{where}.switches[{i}]")
            action = _action(branch.get("action"), f"{where}.switches[{i}].action", depth + 1)
            weight = (None if branch.get("otherwise") is True
                      else _decimal(branch.get("weight"), f"{where}.switches[{i}].weight"))
            branches.append(SwitchBranch(action, weight))
        return Switch(tuple(branches))
    if kind == "parallel":
        calls = []
        for i, item in enumerate(_list(plan.get("calls"), f"{where}.calls")):
            call = _action(item, f"{where}.calls[{i}]", depth + 1)
            if not isinstance(call, Call):
                raise PlanError(f"{where}.calls[{i}]: parallel accepts only calls")
            calls.append(call)
        synthesize = plan.get("synthesize_model")
        return Parallel(tuple(calls), None if synthesize is None
                        else _string(synthesize, f"{where}.synthesize_model"))
    if kind == "judge":
        prompt = plan.get("prompt")
        return Judge(_string(plan.get("model"), f"{where}.model"),
                     _route(plan.get("routes"), f"{where}.routes", depth + 1),
                     None if prompt is None else _string(prompt, f"{where}.prompt"))
    raise PlanError(f"{where}.kind must be call, route, switch, parallel or judge")


def from_plan(value: Any) -> Program:
    plan = _object(value, "definition")
    options = []
    for i, item in enumerate(_list(plan.get("options", []), "definition.options")):
        option = _object(item, f"definition.options[{i}]")
        options.append(Option(_identifier(option.get("name"), f"definition.options[{i}].name"),
                              _literal(option.get("value"), f"definition.options[{i}].value")))
    return Program(tuple(options), _action(plan.get("root"), "definition.root"))
