"""The root resource: health probes, the console mounts, the gateway prefixes, the web
console, and the OpenAPI document of the API."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from twisted.web.resource import Resource

from console.app import mount_console
from console.context import ConsoleContext
from console.openapi.resource import OpenApiDocument
from console.routes.updates import BUILD_VERSION
from console.static import JsonNotFound
from console.web.build import ConsoleBuild
from console.web.resource import AssetDirectory, ConsolePage
from tap.health import Healthz, Readyz

#: first path segments that never fall through to the web console (contract W2/W3)
RESERVED = frozenset({b"api", b"auth", b"v1", b"v1beta", b"assets", b"healthz", b"readyz",
                      b"openapi.json", b"metrics"})


class Root(Resource):
    def __init__(self, console: Resource | None = None) -> None:
        super().__init__()
        self._console = console

    def getChild(self, path: bytes, request: Any) -> Resource:
        if self._console is not None and path not in RESERVED:
            return self._console
        return JsonNotFound()

    def render(self, request: Any) -> bytes:
        if self._console is not None:
            return self._console.render(request)
        return JsonNotFound().render(request)


def build_root(ctx: ConsoleContext, gateway: dict[bytes, Resource] | None = None,
               extra: list[tuple[str, Callable[[ConsoleContext], Any]]] | None = None
               ) -> Resource:
    build = ConsoleBuild.load()
    root = Root(ConsolePage(build, lambda: ctx.settings))
    root.putChild(b"healthz", Healthz())
    root.putChild(b"readyz", Readyz(ctx.db, ctx.state, ctx.clock))
    root.putChild(b"assets", AssetDirectory(build))
    mount_console(root, ctx, extra)
    for prefix, resource in (gateway or {}).items():
        root.putChild(prefix, resource)
    root.putChild(b"openapi.json", OpenApiDocument(root, BUILD_VERSION))
    return root
