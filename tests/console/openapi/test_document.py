"""``GET /openapi.json`` on a real app: served without auth, valid OpenAPI 3.1, the spec's
routes present, and each route family with the security scheme operations contract §3 names."""

from __future__ import annotations

import orjson
from openapi_spec_validator import OpenAPIV31SpecValidator, validate

from console.openapi import shapes
from tests.console.openapi.openapi_case import (
    OpenApiCase,
    answer_schema,
    operations,
    schema_errors,
    shape,
)

#: service-spec §4.1-§4.4, as the spec writes them
SPEC_ROUTES = """
GET /v1/balance
GET /v1/user/balance
GET /v1/models
POST /v1/chat/completions
POST /v1/completions
POST /v1/responses
POST /v1/audio/speech
POST /v1/audio/transcriptions
POST /v1/moderations
POST /v1/uploads/images
POST /v1/images/generations
GET /v1/images/generations/:id
POST /v1/images/edits
POST /v1/videos/generations
GET /v1/videos/generations/:id
POST /v1/videos/:id/remix
POST /v1/clipgen2/private-avatar
GET /v1/tasks/:id
POST /v1/video/generations
GET /v1/video/generations/:id
POST /v1/videos/image2video
GET /v1/videos/image2video/:id
POST /v1/video/tasks
GET /v1/video/tasks/:id
POST /v1/videos/tasks
GET /v1/videos/tasks/:id
POST /v1/artjob/generations
POST /v1/artjob/generations/imagine
POST /v1/artjob/generations/:action
GET /v1/artjob/:id
POST /v1/messages
POST /v1/models/:modelAction
POST /v1beta/models/:modelAction
POST /auth/password/login
POST /auth/password/register
POST /auth/password/email-code
POST /auth/passkey/login/options
POST /auth/passkey/login
GET /auth/login
GET /auth/callback
GET /api/public/settings
GET /api/public/models
GET /api/public/status
GET /api/public/announcements
GET /api/pricing
GET /api/setup/status
POST /api/setup
GET /api/user/me
GET /api/user/catalog
GET /api/user/stats
GET /api/user/logs
GET /api/user/referral
GET /api/user/check-in/status
GET /api/user/check-in/records
POST /api/user/check-in
GET /api/user/payment/config
GET /api/user/payment/orders
POST /api/user/payment/orders
GET /api/user/payment/orders/:order_no
GET /api/user/api-keys
POST /api/user/api-keys
PUT /api/user/api-keys/:id
POST /api/user/api-keys/:id/rotate
POST /api/user/api-keys/:id/reset-usage
DELETE /api/user/api-keys/:id
POST /api/user/api-key/rotate
GET /api/user/password/method
POST /api/user/password/email-code
POST /api/user/password/change
POST /api/user/oidc/bind-url
GET /api/user/passkeys
POST /api/user/passkeys/register/options
POST /api/user/passkeys/register
DELETE /api/user/passkeys/:id
POST /api/user/redeem-code
GET /api/stats
DELETE /api/logs
PUT /api/channels/:id/group-multipliers
POST /api/models/sync/preview/browser
PUT /api/groups/:id
DELETE /api/status-monitors/:id
POST /api/status-monitors/:id/check
PUT /api/redeem-codes/:id
GET /healthz
GET /readyz
GET /openapi.json
"""

KEY = [{"apiKey": []}, {"apiKeyHeader": []}]
JWT = [{"jwt": []}]
DEVICE = [{"connectorToken": []}, {"connectorBearer": []}]


class DocumentTests(OpenApiCase):
    async def test_served_without_auth_as_valid_openapi_3_1(self) -> None:
        response = await self.call("GET", "/openapi.json")
        self.assertEqual(response.status, 200, response)
        self.assertEqual(response.header("content-type"), "application/json")
        document = response.json()
        self.assertEqual(document["openapi"], "3.1.0")
        validate(document, cls=OpenAPIV31SpecValidator)

    async def test_info_version_is_the_build_version_updates_reports(self) -> None:
        document = await self.document()
        token = await self.setup_admin()
        updates = await self.call("GET", "/api/updates", token=token)
        self.assertEqual(updates.status, 200, updates)
        self.assertEqual(document["info"]["version"], updates.json()["current_version"])

    async def test_the_spec_routes_are_documented_by_name(self) -> None:
        documented = {(method, shape(path)) for method, path in operations(
            await self.document())}
        wanted = {(method, shape(path)) for method, path in
                  (line.split() for line in SPEC_ROUTES.strip().splitlines())}
        self.assertEqual(wanted - documented, set())

    async def test_path_parameters_are_declared_in_braces(self) -> None:
        document = await self.document()
        entry = document["paths"]["/v1beta/models/{modelAction}"]["post"]
        self.assertEqual([(p["name"], p["in"], p["required"]) for p in entry["parameters"]],
                         [("modelAction", "path", True)])
        key = document["paths"]["/api/user/api-keys/{key_id}"]["put"]["parameters"]
        self.assertEqual(key, [{"name": "key_id", "in": "path", "required": True,
                                "schema": {"type": "integer", "minimum": 0}}])
        for path in document["paths"]:
            self.assertNotIn(":", path.replace("/openapi.json", ""), path)
            self.assertNotIn("<", path)

    async def test_security_schemes(self) -> None:
        schemes = (await self.document())["components"]["securitySchemes"]
        self.assertEqual(schemes["apiKey"]["type"], "http")
        self.assertEqual(schemes["apiKey"]["scheme"], "bearer")
        self.assertEqual({k: schemes["apiKeyHeader"][k] for k in ("type", "in", "name")},
                         {"type": "apiKey", "in": "header", "name": "x-api-key"})
        self.assertEqual(schemes["jwt"], {**schemes["jwt"], "type": "http",
                                          "scheme": "bearer", "bearerFormat": "JWT"})

    async def test_security_per_route_family(self) -> None:
        document = await self.document()
        seen = set()
        for method, path in operations(document):
            entry = document["paths"][path][method.lower()]
            admin = entry.get("x-lockgate-admin", False)
            if path.startswith(("/v1/", "/v1beta/")):
                family, expected = "gateway", (KEY, False)
            elif path.startswith("/api/user/"):
                family, expected = "user", (JWT, False)
            elif path in ("/healthz", "/readyz", "/openapi.json") or path.startswith(
                    ("/auth/", "/api/public/", "/api/pricing", "/api/setup")):
                family, expected = "none", ([], False)
            elif path.startswith("/api/payment/"):
                family, expected = "callback", ([], False)
            elif path.startswith("/api/advanced-chat/connectors/"):
                family, expected = "device", (DEVICE, False)
            else:
                family, expected = "admin", (JWT, True)
            seen.add(family)
            self.assertEqual((entry["security"], admin), expected, f"{method} {path}")
        self.assertEqual(seen, {"gateway", "user", "none", "callback", "admin", "device"})

    async def test_error_shape_per_family(self) -> None:
        document = await self.document()

        def error_ref(method: str, path: str) -> str:
            content = document["paths"][path][method]["responses"]["default"]["content"]
            ref: str = content["application/json"]["schema"]["$ref"]
            return ref.rsplit("/", 1)[-1]

        self.assertEqual(error_ref("post", "/v1/chat/completions"), "OpenAIError")
        self.assertEqual(error_ref("post", "/v1/messages"), "MessagesError")
        self.assertEqual(error_ref("post", "/v1beta/models/{modelAction}"), "ModelActionError")
        self.assertEqual(error_ref("post", "/v1/models/{modelAction}"), "ModelActionError")
        self.assertEqual(error_ref("get", "/api/user/me"), "ConsoleError")
        schemas = document["components"]["schemas"]
        self.assertEqual(schemas["ConsoleError"]["required"], ["error", "type"])
        self.assertEqual(schemas["OpenAIError"]["properties"]["error"]["required"],
                         ["message", "type"])

    async def test_contract_fixed_bodies(self) -> None:
        document = await self.document()
        login = document["paths"]["/auth/password/login"]["post"]
        body = login["requestBody"]["content"]["application/json"]["schema"]
        self.assertEqual(body["required"], ["identifier", "password"])
        answer = login["responses"]["200"]["content"]["application/json"]["schema"]
        self.assertEqual(answer["required"], ["token", "user"])
        chat = document["paths"]["/v1/chat/completions"]["post"]
        self.assertIn("text/event-stream", chat["responses"]["200"]["content"])
        self.assertEqual(document["paths"]["/auth/login"]["get"]["responses"].keys(),
                         {"302", "default"})
        self.assertEqual(document["paths"]["/readyz"]["get"]["responses"].keys(), {"200", "503"})
        self.assertEqual(document["paths"]["/healthz"]["get"]["responses"].keys(), {"200"})


class AnswerShapeTests(OpenApiCase):
    async def test_every_shape_names_a_documented_route(self) -> None:
        documented = operations(await self.document())
        keyed = (set(shapes.REQUEST_BODIES) | set(shapes.RESPONSES)
                 | set(shapes.QUERY_PARAMETERS) | set(shapes.PROBE_ERRORS))
        self.assertEqual(keyed - documented, set())
        paths = {path for _method, path in documented}
        self.assertEqual((shapes.STREAMING | shapes.REDIRECTS | shapes.BINARY) - paths, set())

    async def test_real_answers_match_their_documented_shapes(self) -> None:
        """An admin reads every GET route without path parameters (the gateway ones with the
        admin's JWT); each 200 JSON answer must validate against the documented schema."""
        document = await self.document()
        token = await self.setup_admin()
        await self.enable_switched_routes(token)
        checked, failures = [], []
        for method, path in sorted(operations(document)):
            if method != "GET" or "{" in path or path in shapes.REDIRECTS or \
                    path.startswith(("/api/payment/", "/api/advanced-chat/connectors/")):
                continue
            response = await self.probe(method, path, token=token)
            self.assertEqual(response.status, 200, f"{path}: {response}")
            schema = answer_schema(document, method, path, 200)
            if schema is not None and schema != shapes.OPEN_OBJECT:
                checked.append(path)
                problems = schema_errors(schema, orjson.loads(response.body))
                if problems:
                    failures.append(f"{path}: {problems}")
        self.assertEqual(failures, [])
        self.assertTrue({"/healthz", "/readyz", "/openapi.json", "/api/settings",
                         "/api/public/settings", "/api/setup/status", "/v1/models",
                         "/v1/balance", "/v1/user/balance"} <= set(checked), checked)

    async def test_settings_bodies_are_reflected_from_the_catalog(self) -> None:
        document = await self.document()
        put = document["paths"]["/api/settings"]["put"]["requestBody"]["content"]
        properties = put["application/json"]["schema"]["properties"]
        self.assertEqual(properties["pricing_endpoint_enabled"]["type"],
                         ["boolean", "integer", "string"])
        self.assertTrue(properties["smtp_password"]["writeOnly"])
        self.assertIn("registration_enabled", properties)  # an alias
        public = document["paths"]["/api/public/settings"]["get"]["responses"]["200"]
        public_keys = set(public["content"]["application/json"]["schema"]["properties"])
        self.assertIn("pricing_endpoint_enabled", public_keys)
        self.assertNotIn("smtp_password", public_keys)

    async def test_api_key_answers_match_their_documented_shapes(self) -> None:
        document = await self.document()
        await self.setup_admin()
        token = (await self.register("keyholder"))["token"]
        steps = [("POST", "/api/user/api-keys", {"name": "ci", "allowed_models": ["m"],
                                                  "ip_whitelist": "10.0.0.0/8", "quota": "5"}),
                 ("GET", "/api/user/api-keys", None),
                 ("PUT", "/api/user/api-keys/{key_id}", {"name": "ci-2", "enabled": False}),
                 ("POST", "/api/user/api-keys/{key_id}/rotate", None),
                 ("POST", "/api/user/api-keys/{key_id}/reset-usage", None),
                 ("POST", "/api/user/api-key/rotate", None),
                 ("DELETE", "/api/user/api-keys/{key_id}", None)]
        key_id = None
        for method, path, body in steps:
            response = await self.call(method, path.replace("{key_id}", str(key_id)), body,
                                       token=token)
            self.assertEqual(response.status, 200, f"{method} {path}: {response}")
            schema = answer_schema(document, method, path, 200)
            assert schema is not None
            self.assertEqual(schema_errors(schema, response.json()), [], f"{method} {path}")
            key_id = key_id or response.json()["id"]

    async def test_documented_log_filters_are_read_by_the_routes(self) -> None:
        """Each documented query parameter, given a malformed value, is refused by name (so
        the route reads it) or, for the paging ones, switches the answer to the envelope."""
        document = await self.document()
        token = await self.setup_admin()
        for path in ("/api/logs", "/api/user/logs"):
            parameters = {p["name"]: p["schema"] for p in document["paths"][path]["get"][
                "parameters"] if p["in"] == "query"}
            self.assertTrue({"page", "page_size", "api_key_id", "model", "from", "to"}
                            <= set(parameters), parameters)
            self.assertEqual("user_id" in parameters, path == "/api/logs")
            for name, schema in parameters.items():
                if (schema.get("type") == "integer" and name.endswith("_id")) or \
                        "description" in schema:
                    response = await self.call("GET", f"{path}?{name}=bogus", token=token)
                    # time aliases (start_time, end_date, ...) are refused under from/to
                    self.assertEqual(response.status, 400, f"{path}?{name}")
                    self.assertIn(response.json()["field"], (name, "from", "to"))
                else:
                    response = await self.call("GET", f"{path}?{name}=1", token=token)
                    self.assertEqual(response.status, 200, f"{path}?{name}")
                    self.assertIsInstance(response.json(), dict, f"{path}?{name}: envelope")
