"""Every route of a running Lockgate, read from the app's own tables -- never a hand list.

The resource tree is walked from the real root: each Klein mount contributes its ``url_map``
rules, the gateway resource its exact table, its prefix routes (model actions) and the task
routes' path tables, and any other leaf (health probes) is tried with GET and POST.  A route
added later is fuzzed without touching the suite.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from console.app import Mounted
from gateway.v1 import task_routes
from gateway.v1.native_routes import MODEL_PREFIXES
from gateway.v1.resource import PREFIX_ROUTES, GatewayResource
from gateway.v1.tasks.bodies import ARTJOB_ACTIONS

#: ``<converter(args):name>`` or ``<name>`` in a werkzeug rule
_RULE_ARG = re.compile(r"<(?:(?P<converter>\w+)(?:\([^)]*\))?:)?(?P<name>\w+)>")
_IGNORED_METHODS = {"HEAD", "OPTIONS"}


@dataclass(frozen=True)
class Param:
    """A path parameter: ``kind`` says which odd values fit it (``int``, ``string``,
    ``action`` for a model action's verb)."""

    name: str
    kind: str


@dataclass(frozen=True)
class Endpoint:
    method: str
    #: literal path pieces and ``Param``s, in order
    pieces: tuple[str | Param, ...]
    #: True for the /v1 data plane (its own error shapes, API keys)
    gateway: bool

    @property
    def template(self) -> str:
        return "".join(p if isinstance(p, str) else f"<{p.kind}:{p.name}>" for p in self.pieces)

    @property
    def params(self) -> list[Param]:
        return [p for p in self.pieces if isinstance(p, Param)]


def _rule_pieces(mount: str, rule: str) -> tuple[str | Param, ...]:
    pieces: list[str | Param] = []
    text = mount + ("" if rule == "/" else rule)
    position = 0
    for match in _RULE_ARG.finditer(text):
        pieces.append(text[position:match.start()])
        pieces.append(Param(match["name"], match["converter"] or "string"))
        position = match.end()
    pieces.append(text[position:])
    return tuple(piece for piece in pieces if piece != "")


def _klein_endpoints(mount: str, mounted: Mounted) -> list[Endpoint]:
    app = mounted._klein._app
    found = []
    for rule in app.url_map.iter_rules():
        for method in sorted((rule.methods or {"GET"}) - _IGNORED_METHODS):
            found.append(Endpoint(method, _rule_pieces(mount, rule.rule), gateway=False))
    return found


def _gateway_endpoints(resource: GatewayResource) -> list[Endpoint]:
    found = [Endpoint(method.decode(), (path.decode(),), gateway=True)
             for method, path in resource.routes]
    for method, prefix, _handler in PREFIX_ROUTES:
        found.append(Endpoint(method.decode(), (prefix.decode(), Param("model", "string"), ":",
                                                Param("verb", "action")), gateway=True))
    if resource.fallback is not None:  # the task routes' tables
        creates = (*task_routes.VIDEO_PREFIXES, *task_routes.COMPAT_CREATE,
                   *task_routes.ARTJOB_CREATE)
        found += [Endpoint("POST", (path,), gateway=True) for path in creates]
        found += [Endpoint("POST", (task_routes.ARTJOB_CREATE[0] + "/" + action,), gateway=True)
                  for action in sorted(ARTJOB_ACTIONS)]
        found.append(Endpoint("POST", ("/v1/videos/", Param("task_id", "string"), "/remix"),
                              gateway=True))
        queries = [prefix + "/" for prefix in task_routes.VIDEO_PREFIXES]
        queries += list(task_routes.COMPAT_QUERIES)
        found += [Endpoint("GET", (prefix, Param("task_id", "string")), gateway=True)
                  for prefix in queries]
    for prefix in MODEL_PREFIXES:  # GET on the model-action prefix (unknown: must be a 404)
        found.append(Endpoint("GET", (prefix.decode(), Param("model", "string")), gateway=True))
    return found


def endpoints(root: Any) -> list[Endpoint]:
    """All endpoints under ``root`` (the real app's root resource), deduplicated, sorted."""
    found: list[Endpoint] = []
    seen_gateways: set[int] = set()

    def walk(resource: Any, prefix: str) -> None:
        for name, child in sorted(resource.children.items()):
            path = prefix + "/" + name.decode()
            if isinstance(child, Mounted):
                found.extend(_klein_endpoints(path, child))
            elif isinstance(child, GatewayResource):
                if id(child) not in seen_gateways:
                    seen_gateways.add(id(child))
                    found.extend(_gateway_endpoints(child))
            elif child.children:
                walk(child, path)
            else:
                found.extend(Endpoint(method, (path,), gateway=False)
                             for method in ("GET", "POST"))

    walk(root, "")
    unique = {(e.method, e.pieces): e for e in found}
    return sorted(unique.values(), key=lambda e: (e.template, e.method))
