"""Mounts every console route group at its path (one Klein app per group).

Route groups are listed in ``MOUNTS``; each is a class with a class-level Klein ``app`` whose
routes are relative to its mount point.  Paths under ``/api`` and ``/auth`` that no group owns
answer a JSON 404.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from twisted.web.resource import Resource

from console.context import ConsoleContext
from console.routes.me import MeRoutes
from console.routes.password_auth import PasswordAuthRoutes
from console.routes.public import PublicSettingsRoutes
from console.routes.settings import SettingsRoutes
from console.routes.setup import SetupRoutes
from console.static import JsonNotFound

#: (mount path, route group factory)
MOUNTS: list[tuple[str, Callable[[ConsoleContext], Any]]] = [
    ("api/setup", SetupRoutes),
    ("api/public/settings", PublicSettingsRoutes),
    ("api/settings", SettingsRoutes),
    ("api/user/me", MeRoutes),
    ("auth/password", PasswordAuthRoutes),
]


class Mounted(Resource):
    """Hands a whole subtree to a Klein resource; the mount point itself routes as ``/``."""

    isLeaf = True

    def __init__(self, klein_resource: Resource) -> None:
        super().__init__()
        self._klein = klein_resource

    def render(self, request: Any) -> Any:
        if not request.postpath:
            request.postpath = [b""]
        return self._klein.render(request)


class Branch(Resource):
    """An intermediate path segment: known children, JSON 404 for anything else."""

    def getChild(self, path: bytes, request: Any) -> Resource:
        return JsonNotFound()

    def render(self, request: Any) -> bytes:
        return JsonNotFound().render(request)


def mount_console(root: Resource, ctx: ConsoleContext,
                  extra: list[tuple[str, Callable[[ConsoleContext], Any]]] | None = None) -> None:
    """Attach every route group under ``root`` (which serves ``/``)."""
    for path, factory in MOUNTS + (extra or []):
        segments = [segment.encode() for segment in path.split("/")]
        parent = root
        for segment in segments[:-1]:
            child = parent.children.get(segment)
            if child is None:
                child = Branch()
                parent.putChild(segment, child)
            parent = child
        parent.putChild(segments[-1], Mounted(factory(ctx).app.resource()))
