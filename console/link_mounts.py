"""Where the agent-link route groups live (agents contract §1.13, §2, §3): the device and
connector-task routes of users, the sandbox-host routes of admins, and the device endpoint
(WebSocket + long poll) built by ``gateway.links``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from twisted.web.resource import Resource

from console.app import mount_resource
from console.context import ConsoleContext
from console.routes.connector_tasks import ConnectorTaskRoutes
from console.routes.devices import DeviceRoutes
from console.routes.sandbox_hosts import AvailableHostRoutes, SandboxHostRoutes

LINK_MOUNTS: list[tuple[str, Callable[[ConsoleContext], Any]]] = [
    ("api/user/advanced-chat/devices", DeviceRoutes),
    ("api/user/advanced-chat/connector-tasks", ConnectorTaskRoutes),
    ("api/user/advanced-chat/sandbox-hosts", AvailableHostRoutes),
    ("api/advanced-chat/sandbox-hosts", SandboxHostRoutes),
]

CONNECTORS_PATH = "api/advanced-chat/connectors"


def mount_device_endpoint(root: Resource, ctx: ConsoleContext) -> None:
    if ctx.links is not None:
        mount_resource(root, CONNECTORS_PATH, ctx.links.resource)
