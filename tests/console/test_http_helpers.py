"""The console's shared JSON plumbing: body parsing, error bodies, 404/405/413/500, ``Body``.

Real HTTP against the real app for the routes, plus a throwaway route group served on loopback
to reach the wrapper's branches (extra fields, headers, unhandled errors).
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import treq
from twisted.internet import reactor
from twisted.trial.unittest import TestCase
from twisted.web.server import Site

from console.http import DEFAULT_BODY_LIMIT, ApiError, json_route, make_app, read_object
from console.validation import MISSING, Body
from tests.support.app import AppTestCase

JSON = "application/json"


class JsonBodyTests(AppTestCase):
    async def test_malformed_json_is_400(self) -> None:
        for raw in (b"{", b'{"identifier": }', b"nul", b"\xff\xfe"):
            response = await self.call("POST", "/auth/password/login", data=raw)
            assert response.status == 400, (raw, response)
            assert response.header("Content-Type") == JSON
            body = response.json()
            assert body["type"] == "invalid_request"
            assert body["error"].startswith("malformed JSON"), body

    async def test_non_object_body_is_400(self) -> None:
        for raw in (b"[]", b'"text"', b"42", b"null", b"", b"   "):
            response = await self.call("POST", "/api/setup", data=raw)
            assert response.status == 400, (raw, response)
            assert response.json() == {"error": "request body must be a JSON object",
                                       "type": "invalid_request"}

    async def test_wrong_field_types_name_the_field(self) -> None:
        response = await self.call("POST", "/api/setup", {
            "site_name": 12, "username": "root", "email": "r@example.com",
            "password": "password123"})
        assert response.status == 400
        assert response.json() == {"error": "site_name must be a string",
                                   "type": "invalid_request", "field": "site_name"}
        response = await self.call("POST", "/api/setup", {
            "username": ["root"], "email": "r@example.com", "password": "password123"})
        assert response.status == 400 and response.json()["field"] == "username"

    async def test_body_over_the_limit_is_413(self) -> None:
        admin = await self.setup_admin()
        big = b'{"site_name": "' + b"x" * DEFAULT_BODY_LIMIT + b'"}'
        response = await self.call("PUT", "/api/settings", data=big, token=admin)
        assert response.status == 413, response
        assert response.json()["type"] == "payload_too_large"
        assert self.ctx.settings.text("site_name") == "Lockgate"
        login = await self.call("POST", "/auth/password/login", data=big)
        assert login.status == 413

    async def test_unknown_paths_are_json_404(self) -> None:
        for path in ("/api/nope", "/api/user/nope", "/auth/nope", "/api/settings/extra/deep",
                     "/api/public/nope", "/auth/password/nope", "/api"):
            response = await self.call("GET", path)
            assert response.status == 404, (path, response)
            assert response.header("Content-Type") == JSON
            assert response.json() == {"error": "Not found", "type": "not_found"}

    async def test_wrong_method_is_json_405(self) -> None:
        for method, path in (("DELETE", "/api/settings"), ("POST", "/api/public/settings"),
                             ("GET", "/auth/password/login"), ("PUT", "/api/setup/status")):
            response = await self.call(method, path)
            assert response.status == 405, (method, path, response)
            assert response.header("Content-Type") == JSON
            assert response.json() == {"error": "Method not allowed",
                                       "type": "method_not_allowed"}

    async def test_responses_are_not_cached(self) -> None:
        response = await self.call("GET", "/api/public/settings")
        assert response.header("Cache-Control") == "no-store"


class Probe:
    """A route group that exercises every branch of ``json_route``."""

    app = make_app()

    @app.route("/ok", methods=["GET"])
    @json_route
    async def ok(self, request: Any) -> Any:
        return {"price": "1.5"}

    @app.route("/created", methods=["POST"])
    @json_route
    async def created(self, request: Any) -> Any:
        return 201, read_object(request, optional=True)

    @app.route("/small", methods=["POST"])
    @json_route
    async def small(self, request: Any) -> Any:
        return read_object(request, limit=10)

    @app.route("/refuse", methods=["GET"])
    @json_route
    async def refuse(self, request: Any) -> Any:
        raise ApiError(429, "slow down", extra={"retry_after": 7},
                       headers={"Retry-After": "7"})

    @app.route("/boom", methods=["GET"])
    @json_route
    async def boom(self, request: Any) -> Any:
        raise RuntimeError("SELECT secret FROM internals")


class JsonRouteTests(TestCase):
    def setUp(self) -> None:
        self.port = reactor.listenTCP(0, Site(Probe().app.resource()), interface="127.0.0.1")
        self.addCleanup(self.port.stopListening)
        self.base = f"http://127.0.0.1:{self.port.getHost().port}"

    async def fetch(self, method: str, path: str, data: bytes | None = None) -> tuple[int, Any, bytes]:
        response = await treq.request(method, self.base + path, data=data, persistent=False)
        return response.code, response.headers, await treq.content(response)

    async def test_success_and_chosen_status(self) -> None:
        status, headers, body = await self.fetch("GET", "/ok")
        assert (status, body) == (200, b'{"price":"1.5"}')
        assert headers.getRawHeaders("content-type") == [JSON]
        status, _, body = await self.fetch("POST", "/created", b'{"a": 1}')
        assert (status, body) == (201, b'{"a":1}')
        status, _, body = await self.fetch("POST", "/created", b"")
        assert (status, body) == (201, b"{}")

    async def test_custom_limit(self) -> None:
        status, _, _ = await self.fetch("POST", "/small", b'{"a": "12"}')
        assert status == 413
        status, _, _ = await self.fetch("POST", "/small", b'{"a": 1}')
        assert status == 200

    async def test_api_error_extras_and_headers(self) -> None:
        status, headers, body = await self.fetch("GET", "/refuse")
        assert status == 429
        assert headers.getRawHeaders("retry-after") == ["7"]
        assert body == b'{"error":"slow down","type":"rate_limited","retry_after":7}'

    async def test_unhandled_error_is_a_bare_500(self) -> None:
        status, _, body = await self.fetch("GET", "/boom")
        assert status == 500
        assert body == b'{"error":"Internal server error","type":"internal"}'
        errors = self.flushLoggedErrors(RuntimeError)
        assert len(errors) == 1


class BodyTests(TestCase):
    def refused(self, call: Any, field: str) -> str:
        with self.assertRaises(ApiError) as caught:
            call()
        assert caught.exception.status == 400
        assert caught.exception.field == field
        return caught.exception.message

    def test_missing_and_explicit_falsy_values(self) -> None:
        body = Body({"enabled": False, "priority": 0, "name": "", "gone": None})
        assert body.boolean("enabled") is False
        assert body.integer("priority") == 0
        assert body.string("name") == ""
        assert body.string("absent") is MISSING
        assert body.string("gone") is MISSING
        assert not MISSING
        assert self.refused(lambda: body.string("absent", required=True), "absent") == \
            "absent is required"
        assert self.refused(lambda: body.string("name", allow_blank=False), "name") == \
            "name is required"

    def test_type_checks(self) -> None:
        body = Body({"s": 5, "b": "true", "i": "x", "f": 1.5, "d": "1.0000000001",
                     "c": "blue", "ids": [1, True], "strs": ["a", 2], "o": [],
                     "neg": -1, "long": "abcdef"})
        self.refused(lambda: body.string("s"), "s")
        self.refused(lambda: body.boolean("b"), "b")
        self.refused(lambda: body.integer("i"), "i")
        self.refused(lambda: body.integer("f"), "f")
        self.refused(lambda: body.decimal("d"), "d")
        self.refused(lambda: body.decimal("neg"), "neg")
        self.refused(lambda: body.choice("c", ["red", "green"]), "c")
        self.refused(lambda: body.int_list("ids"), "ids")
        self.refused(lambda: body.string_list("strs"), "strs")
        self.refused(lambda: body.obj("o"), "o")
        self.refused(lambda: body.integer("neg", minimum=0), "neg")
        self.refused(lambda: body.string("long", max_length=3), "long")

    def test_conversions(self) -> None:
        body = Body({"i": "42", "f": 3.0, "d": 0.1, "ds": " 2.5 ", "list": "a, b  c",
                     "ids": [3, 4], "s": "  x  "})
        assert body.integer("i") == 42
        assert body.integer("f") == 3
        assert body.decimal("d") == Decimal("0.1")
        assert body.decimal("ds") == Decimal("2.5")
        assert body.string_list("list", split=True) == ["a", "b", "c"]
        assert body.int_list("ids") == [3, 4]
        assert body.string("s") == "x"
        assert body.first_present("nope", "s", "i") == "s"
