"""The parsed meta-model program: its nodes, their ``plan`` JSON (contract §6.3) and source form.

``render`` writes a program back as canonical source, so ``parse(render(p)) == p`` for every
program the parser can produce; ``from_plan`` reads the ``plan`` object an admin may send instead
of source (console contract D9).
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Any, TypeAlias

from gateway.metamodels.lexer import quote

Value: TypeAlias = str | Decimal | bool


@dataclass(frozen=True)
class Literal:
    value: Value

    @property
    def kind(self) -> str:
        if isinstance(self.value, bool):
            return "bool"
        return "number" if isinstance(self.value, Decimal) else "string"


@dataclass(frozen=True)
class Option:
    name: str
    value: Literal


@dataclass(frozen=True)
class Condition:
    left: str
    operator: str
    right: Literal


@dataclass(frozen=True)
class Call:
    model: str


@dataclass(frozen=True)
class RouteBranch:
    action: Action
    #: ``None`` on the ``otherwise`` branch
    condition: Condition | None = None


@dataclass(frozen=True)
class Route:
    branches: tuple[RouteBranch, ...]


@dataclass(frozen=True)
class SwitchBranch:
    action: Action
    #: ``None`` on the ``otherwise`` branch
    weight: Decimal | None = None


@dataclass(frozen=True)
class Switch:
    branches: tuple[SwitchBranch, ...]


@dataclass(frozen=True)
class Parallel:
    calls: tuple[Call, ...]
    synthesize: str | None = None


@dataclass(frozen=True)
class Judge:
    model: str
    route: Route
    prompt: str | None = None


Action: TypeAlias = Call | Route | Switch | Parallel | Judge


@dataclass(frozen=True)
class Program:
    options: tuple[Option, ...]
    root: Action


# -- plan JSON ------------------------------------------------------------------------------

def _number(value: Decimal) -> int | float:
    return int(value) if value == value.to_integral_value() else float(value)


def literal_plan(literal: Literal) -> dict[str, Any]:
    value = literal.value
    if isinstance(value, bool):
        return {"kind": "bool", "bool": value}
    if isinstance(value, Decimal):
        return {"kind": "number", "number": _number(value)}
    return {"kind": "string", "string": value}


def _route_plan(route: Route) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for branch in route.branches:
        if branch.condition is None:
            out.append({"otherwise": True, "action": action_plan(branch.action)})
        else:
            condition = branch.condition
            out.append({"condition": {"left": condition.left, "operator": condition.operator,
                                      "right": literal_plan(condition.right)},
                        "action": action_plan(branch.action)})
    return out


def action_plan(action: Action) -> dict[str, Any]:
    if isinstance(action, Call):
        return {"kind": "call", "model": action.model}
    if isinstance(action, Route):
        return {"kind": "route", "routes": _route_plan(action)}
    if isinstance(action, Switch):
        return {"kind": "switch", "switches": [
            {"otherwise": True, "action": action_plan(b.action)} if b.weight is None
            else {"weight": _number(b.weight), "action": action_plan(b.action)}
            for b in action.branches]}
    if isinstance(action, Parallel):
        plan: dict[str, Any] = {"kind": "parallel",
                                "calls": [action_plan(call) for call in action.calls]}
        if action.synthesize is not None:
            plan["synthesize_model"] = action.synthesize
        return plan
    plan = {"kind": "judge", "model": action.model, "routes": _route_plan(action.route)}
    if action.prompt is not None:
        plan["prompt"] = action.prompt
    return plan


def to_plan(program: Program) -> dict[str, Any]:
    return {"options": [{"name": o.name, "value": literal_plan(o.value)} for o in program.options],
            "root": action_plan(program.root)}


# -- source ---------------------------------------------------------------------------------

def _literal_source(literal: Literal) -> str:
    value = literal.value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, Decimal):
        return format(value, "f")
    return quote(value)


def _route_source(route: Route, indent: str) -> list[str]:
    inner = indent + "  "
    lines = ["{"]
    for branch in route.branches:
        head = ("otherwise" if branch.condition is None else
                f"when {branch.condition.left} {branch.condition.operator} "
                f"{_literal_source(branch.condition.right)}")
        lines.append(f"{inner}{head} => {_action_source(branch.action, inner)}")
    lines.append(indent + "}")
    return lines


def _action_source(action: Action, indent: str) -> str:
    inner = indent + "  "
    if isinstance(action, Call):
        return f"call {quote(action.model)}"
    if isinstance(action, Route):
        return "route " + "\n".join(_route_source(action, indent))
    if isinstance(action, Switch):
        lines = ["switch {"]
        for branch in action.branches:
            head = "otherwise" if branch.weight is None else f"weight {format(branch.weight, 'f')}"
            lines.append(f"{inner}{head} => {_action_source(branch.action, inner)}")
        lines.append(indent + "}")
        return "\n".join(lines)
    if isinstance(action, Parallel):
        calls = "; ".join(f"call {quote(call.model)}" for call in action.calls)
        tail = "" if action.synthesize is None else f" synthesize {quote(action.synthesize)}"
        return f"parallel {{ {calls} }}{tail}"
    lines = [f"judge {quote(action.model)} {{"]
    if action.prompt is not None:
        lines.append(f"{inner}prompt {quote(action.prompt)}")
    lines.append(f"{inner}route " + "\n".join(_route_source(action.route, inner)))
    lines.append(indent + "}")
    return "\n".join(lines)


def render(program: Program) -> str:
    """Canonical source text for ``program``."""
    lines = [f"option {o.name} = {_literal_source(o.value)}" for o in program.options]
    lines.append(_action_source(program.root, ""))
    return "\n".join(lines) + "\n"
