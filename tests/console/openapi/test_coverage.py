"""The document and the live routes agree, both ways (operations contract §3).

Documented -> served: every documented method and path is requested on a real app over HTTP
(path parameters filled in); none may answer the generic unknown-route 404 or a 405; a route
documented with a credential answers 401 without one (an admin route 403 to a signed-in
non-admin), and a route documented without one does not ask for one.

Served -> documented: the route tables are enumerated here on their own (the console groups'
class-level Klein maps from ``MOUNTS``, the gateway tables, the task routes checked against
the task matcher, the probes) and the live resource tree is walked; each must be documented.
"""

from __future__ import annotations

import re
from typing import Any

import orjson
from twisted.web.resource import Resource

from console.app import MOUNTS, Branch, mount_console
from console.assistant_mounts import ASSISTANT_MOUNTS
from console.http import json_route, make_app
from console.openapi.document import build_document
from console.openapi.routes import UnknownRouteTable
from console.static import JsonNotFound
from console.web.resource import AssetDirectory
from gateway.v1 import task_routes
from gateway.v1.resource import PREFIX_ROUTES, ROUTES, GatewayResource
from gateway.v1.task_routes import TaskRoutes
from tap.root import Root
from tests.console.openapi.openapi_case import (
    OpenApiCase,
    answer_schema,
    operations,
    schema_errors,
    shape,
)

#: the task routes of gateway contract §1 as concrete requests
CONTRACT_TASK_REQUESTS = [
    ("POST", "/v1/videos/generations"), ("GET", "/v1/videos/generations/t1"),
    ("POST", "/v1/videos/t1/remix"), ("POST", "/v1/clipgen2/private-avatar"),
    ("GET", "/v1/tasks/t1"), ("GET", "/v1/images/generations/t1"),
    ("POST", "/v1/video/generations"), ("GET", "/v1/video/generations/t1"),
    ("POST", "/v1/videos/image2video"), ("GET", "/v1/videos/image2video/t1"),
    ("POST", "/v1/video/tasks"), ("GET", "/v1/video/tasks/t1"),
    ("POST", "/v1/videos/tasks"), ("GET", "/v1/videos/tasks/t1"),
    ("POST", "/v1/artjob/generations"), ("POST", "/v1/artjob/generations/imagine"),
    ("POST", "/v1/artjob/generations/upscale"), ("GET", "/v1/artjob/t1"),
]
IMPLIED = {"HEAD", "OPTIONS"}
_RULE_ARGUMENT = re.compile(r"<(?:[^:>]+:)?(\w+)>")


def _value(parameter: dict[str, Any]) -> str:
    schema = parameter["schema"]
    if parameter["name"] == "modelAction":
        return "gemini-2.0-flash:generateContent"
    if "enum" in schema:
        return str(schema["enum"][0])
    return "1"


def _concrete(document: dict[str, Any], method: str, path: str) -> str:
    entry = document["paths"][path][method.lower()]
    values = {p["name"]: _value(p) for p in entry.get("parameters", [])}
    return re.sub(r"\{(\w+)\}", lambda m: values[m[1]], path)


def _is_unknown_route(status: int, body: bytes) -> bool:
    """The generic 404 of an unmatched path (console or any gateway family) or a 405."""
    return status == 405 or (status == 404 and b'"Not found"' in body)


def _tables() -> set[tuple[str, str]]:
    """Every route the tables hold, enumerated without the generator."""
    found: set[tuple[str, str]] = set()
    for mount, group in [*MOUNTS, *ASSISTANT_MOUNTS]:
        for rule in group.app.url_map.iter_rules():
            path = ("/" + mount + _RULE_ARGUMENT.sub(r"{\1}", rule.rule)).rstrip("/")
            found |= {(method, path) for method in rule.methods - IMPLIED}
    found |= {(method.decode(), path.decode()) for method, path in ROUTES}
    found |= {(method.decode(), prefix.decode() + "{modelAction}")
              for method, prefix, _handler in PREFIX_ROUTES}
    found |= set(task_routes.templates())
    found |= {("GET", "/healthz"), ("GET", "/readyz"), ("GET", "/openapi.json")}
    return found


class CoverageTests(OpenApiCase):
    async def test_every_documented_operation_is_served_with_its_security(self) -> None:
        document = await self.document()
        await self.enable_switched_routes(await self.setup_admin())
        failures = []
        for method, path in sorted(operations(document)):
            entry = document["paths"][path][method.lower()]
            response = await self.probe(method, _concrete(document, method, path))
            if _is_unknown_route(response.status, response.body):
                failures.append(f"{method} {path}: not served ({response.status})")
            elif bool(entry["security"]) != (response.status == 401):
                failures.append(f"{method} {path}: security {entry['security']} but "
                                f"{response.status}")
            elif response.status in (200, 302) and (
                    str(response.status) not in entry["responses"]):
                failures.append(f"{method} {path}: {response.status} is not documented")
            elif response.status >= 400 and (schema := answer_schema(
                    document, method, path, response.status)) is not None:
                problems = schema_errors(schema, orjson.loads(response.body))
                if problems:
                    failures.append(f"{method} {path}: error body {problems}")
        self.assertEqual(failures, [])

    async def test_admin_routes_refuse_a_signed_in_user(self) -> None:
        document = await self.document()
        await self.setup_admin()
        token = (await self.register("someone"))["token"]
        admin = sorted((method, path) for method, path in operations(document)
                       if document["paths"][path][method.lower()].get("x-lockgate-admin"))
        self.assertGreater(len(admin), 40)
        answers = {}
        for method, path in admin:
            response = await self.probe(method, _concrete(document, method, path), token=token)
            answers[f"{method} {path}"] = response.status
        self.assertEqual({k: v for k, v in answers.items() if v != 403}, {})

    async def test_every_route_table_entry_is_documented_and_nothing_else(self) -> None:
        documented = operations(await self.document())
        self.assertEqual(documented ^ _tables(), set())

    async def test_the_live_gateway_table_is_documented(self) -> None:
        documented = operations(await self.document())
        gateway = self.app.root.children[b"v1"]
        self.assertIsInstance(gateway, GatewayResource)
        served = {(method.decode(), path.decode()) for method, path in gateway.routes}
        self.assertEqual(served - documented, set())

    async def test_task_templates_are_what_the_task_matcher_accepts(self) -> None:
        documented = {(method, shape(path)) for method, path in
                      operations(await self.document())}
        matcher = TaskRoutes()
        for method, template in task_routes.templates():
            concrete = template.replace("{id}", "t1").replace("{action}", "upscale")
            self.assertIsNotNone(matcher.match(method.encode(), concrete.encode()), template)
        for method, path in CONTRACT_TASK_REQUESTS:
            self.assertIsNotNone(matcher.match(method.encode(), path.encode()), path)
            generic = re.sub(r"/t1(?=/|$)", "/{}", path).replace("/upscale", "/{}")
            self.assertIn((method, generic), documented)

    async def test_every_resource_in_the_tree_is_documented(self) -> None:
        paths = set((await self.document())["paths"])
        missing = []

        def walk(resource: Resource, prefix: str) -> None:
            for name, child in resource.children.items():
                path = f"{prefix}/{name.decode()}"
                if isinstance(child, Branch):
                    walk(child, path)
                elif isinstance(child, AssetDirectory):
                    continue  # the web console's files (web console contract W5), not API
                elif not isinstance(child, JsonNotFound) and not any(
                        p == path or p.startswith(path + "/") for p in paths):
                    missing.append(path)

        walk(self.app.root, "")
        self.assertEqual(missing, [])


class NewRoutes:
    """A route group that exists only in this test."""

    app = make_app()

    def __init__(self, ctx: Any) -> None:
        self.ctx = ctx

    @app.route("/<int:thing_id>/poke", methods=["POST", "DELETE"])
    @json_route
    async def poke(self, request: Any, thing_id: int) -> dict[str, Any]:
        """Poke a thing."""
        return {}


class GeneratedTests(OpenApiCase):
    def test_a_newly_mounted_group_is_documented_without_listing_it(self) -> None:
        root = Root()
        mount_console(root, self.ctx, extra=[("api/user/things", NewRoutes)])
        document = build_document(root, "x")
        entry = document["paths"]["/api/user/things/{thing_id}/poke"]
        self.assertEqual(set(entry), {"post", "delete"})
        self.assertEqual(entry["post"]["summary"], "Poke a thing")
        self.assertEqual(entry["post"]["security"], [{"jwt": []}])

    def test_a_gateway_fallback_it_cannot_enumerate_is_an_error(self) -> None:
        root = Root()
        gateway = self.app.root.children[b"v1"]
        root.putChild(b"v1", GatewayResource(gateway.ctx, fallback=lambda method, path: None))
        self.assertRaises(UnknownRouteTable, build_document, root, "x")
