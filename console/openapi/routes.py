"""Walks the root resource tree and lists every (method, path template) it serves.

The route tables are the single source of truth: a Klein group's ``url_map`` as mounted, the
gateway resource's exact table and prefix routes and its task-route matcher, and any plain
resource's ``render_<METHOD>`` methods (the probes, this document).  A gateway fallback this
walker does not know raises instead of silently leaving routes out.
"""

from __future__ import annotations

import inspect
import re
from dataclasses import dataclass, field
from typing import Any

from twisted.web.resource import Resource

from console.app import Mounted
from gateway.v1 import task_routes
from gateway.v1.resource import PREFIX_ROUTES, GatewayResource
from gateway.v1.task_routes import TaskRoutes

#: methods a route answers only because another is declared (werkzeug adds HEAD to GET)
IMPLIED_METHODS = frozenset({"HEAD", "OPTIONS"})
#: the path parameter of the gateway's prefix routes (``/v1[beta]/models/<model>:<action>``)
PREFIX_PARAMETER = "modelAction"
#: the schema of each task-route path parameter
TASK_PARAMETERS: dict[str, dict[str, Any]] = {
    "id": {"type": "string"},
    "action": {"type": "string", "enum": sorted(task_routes.ARTJOB_ACTIONS)},
}

_RULE_ARGUMENT = re.compile(
    r"<(?:(?P<converter>[a-zA-Z_]\w*)(?:\((?P<args>[^)]*)\))?:)?(?P<name>[a-zA-Z_]\w*)>")
_TEMPLATE_ARGUMENT = re.compile(r"\{(?P<name>[a-zA-Z_]\w*)\}")


class UnknownRouteTable(Exception):
    """A resource dispatches through something the walker cannot enumerate."""


@dataclass(frozen=True)
class Parameter:
    name: str
    schema: dict[str, Any] = field(hash=False, compare=False)


@dataclass(frozen=True)
class Operation:
    """One method on one OpenAPI path template."""

    method: str
    path: str
    parameters: tuple[Parameter, ...] = ()
    summary: str = field(default="", compare=False)


def _converter_schema(converter: str | None, args: str | None) -> dict[str, Any]:
    if converter == "int":
        return {"type": "integer", "minimum": 0}
    if converter == "float":
        return {"type": "number"}
    if converter == "uuid":
        return {"type": "string", "format": "uuid"}
    if converter == "any" and args:
        return {"type": "string",
                "enum": [item.strip().strip("'\"") for item in args.split(",")]}
    return {"type": "string"}


def klein_template(rule: str) -> tuple[str, tuple[Parameter, ...]]:
    """A werkzeug rule (``/<int:key_id>/rotate``) as ``/{key_id}/rotate`` plus its parameters."""
    parameters = tuple(
        Parameter(match["name"], _converter_schema(match["converter"], match["args"]))
        for match in _RULE_ARGUMENT.finditer(rule))
    return _RULE_ARGUMENT.sub(lambda match: "{" + match["name"] + "}", rule), parameters


def _join(prefix: str, tail: str) -> str:
    path = (prefix + tail).rstrip("/")
    return path or "/"


def _summary(function: Any) -> str:
    """The first docstring line of a handler (under Klein's and ``json_route``'s wrappers),
    else its name in words."""
    if callable(function):
        function = inspect.unwrap(function)
    doc = (getattr(function, "__doc__", None) or "").strip()
    if doc:
        return doc.splitlines()[0].rstrip(".")
    name = getattr(function, "__name__", "")
    return name.replace("_", " ").strip().capitalize()


def _klein_operations(prefix: str, mounted: Mounted) -> list[Operation]:
    operations = []
    for rule in mounted.klein_app.url_map.iter_rules():
        if rule.methods is None:
            raise UnknownRouteTable(f"{prefix}{rule.rule} accepts every method")
        tail, parameters = klein_template(rule.rule)
        summary = _summary(mounted.klein_app.endpoints.get(rule.endpoint))
        operations += [Operation(method, _join(prefix, tail), parameters, summary)
                       for method in sorted(rule.methods - IMPLIED_METHODS)]
    return operations


def _template_parameters(path: str, schemas: dict[str, dict[str, Any]]) -> tuple[Parameter, ...]:
    return tuple(Parameter(match["name"], schemas[match["name"]])
                 for match in _TEMPLATE_ARGUMENT.finditer(path))


def _gateway_operations(prefix: str, gateway: GatewayResource) -> list[Operation]:
    mine = prefix + "/"
    operations = [Operation(method.decode(), path.decode())
                  for method, path in gateway.routes if path.decode().startswith(mine)]
    prefix_schema = {PREFIX_PARAMETER: {"type": "string"}}
    for method, route_prefix, _handler in PREFIX_ROUTES:
        if route_prefix.decode().startswith(mine):
            path = f"{route_prefix.decode()}{{{PREFIX_PARAMETER}}}"
            operations.append(Operation(method.decode(), path,
                                        _template_parameters(path, prefix_schema)))
    if gateway.fallback is not None:
        owner = getattr(gateway.fallback, "__self__", None)
        if not isinstance(owner, TaskRoutes):
            raise UnknownRouteTable(f"{prefix}: unknown gateway fallback {gateway.fallback!r}")
        operations += [Operation(method, path, _template_parameters(path, TASK_PARAMETERS))
                       for method, path in task_routes.templates() if path.startswith(mine)]
    return operations


def _plain_operations(path: str, resource: Resource) -> list[Operation]:
    methods = sorted(name[len("render_"):] for name in dir(resource)
                     if name.startswith("render_") and name[len("render_"):].isupper())
    return [Operation(method, path or "/", summary=_summary(type(resource)))
            for method in methods if method not in IMPLIED_METHODS]


def _walk(resource: Resource, prefix: str, operations: list[Operation]) -> None:
    for name, child in resource.children.items():
        path = f"{prefix}/{name.decode()}"
        if isinstance(child, Mounted):
            operations += _klein_operations(path, child)
        elif isinstance(child, GatewayResource):
            operations += _gateway_operations(path, child)
        else:
            operations += _plain_operations(path, child)
            _walk(child, path, operations)


def collect(root: Resource) -> list[Operation]:
    """Every operation under ``root`` (which serves ``/``), sorted by path then method."""
    operations: list[Operation] = _plain_operations("", root)
    _walk(root, "", operations)
    unique = {(op.method, op.path): op for op in operations}
    return sorted(unique.values(), key=lambda op: (op.path, op.method))
