"""The root resource: health probes, the console mounts, the gateway prefixes, and the OpenAPI
document of all of them."""

from __future__ import annotations

from typing import Any

from twisted.web.resource import Resource

from console.app import mount_console
from console.context import ConsoleContext
from console.openapi.resource import OpenApiDocument
from console.routes.updates import BUILD_VERSION
from console.static import JsonNotFound
from tap.health import Healthz, Readyz


class Root(Resource):
    def getChild(self, path: bytes, request: Any) -> Resource:
        return JsonNotFound()

    def render(self, request: Any) -> bytes:
        return JsonNotFound().render(request)


def build_root(ctx: ConsoleContext, gateway: dict[bytes, Resource] | None = None) -> Resource:
    root = Root()
    root.putChild(b"healthz", Healthz())
    root.putChild(b"readyz", Readyz(ctx.db, ctx.state))
    mount_console(root, ctx)
    for prefix, resource in (gateway or {}).items():
        root.putChild(prefix, resource)
    root.putChild(b"openapi.json", OpenApiDocument(root, BUILD_VERSION))
    return root
