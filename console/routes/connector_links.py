"""``/api/advanced-chat/connectors``: where connector devices and sandbox hosts call in with
their device token (agents contract §2.2 to §2.4).

``ws`` hands the request to the WebSocket endpoint (it authenticates before the upgrade); the
other four are the origin's long-poll routes.  A missing token is 401 ``Connector token is
required``, an unknown one 401 ``Invalid connector token``.
"""

from __future__ import annotations

from typing import Any

from twisted.internet.defer import CancelledError
from twisted.web.resource import Resource

from console.context import ConsoleContext
from console.http import ApiError, json_route, make_app, read_object
from gateway.links.device_auth import DeviceAuthError, authenticate
from gateway.links.long_poll import PollRefused
from gateway.store.devices import DeviceRow

#: a result may carry up to 200000 characters of each of several text fields
RESULT_LIMIT = 4 << 20


class ConnectorLinkRoutes:
    """Mounted at ``/api/advanced-chat/connectors``."""

    app = make_app()

    def __init__(self, ctx: ConsoleContext) -> None:
        self.ctx = ctx

    async def _device(self, request: Any) -> DeviceRow:
        try:
            return await authenticate(self.ctx.db, request)
        except DeviceAuthError as exc:
            raise ApiError(401, str(exc)) from None

    @app.route("/ws", methods=["GET"])
    def ws(self, request: Any) -> Resource:
        """The device's WebSocket link (token in a header, as a bearer or ?token=)."""
        return self.ctx.agent_links.endpoint

    @app.route("/register", methods=["POST"])
    @json_route
    async def register(self, request: Any) -> dict[str, Any]:
        """Register a device (long-poll transport): it is online now."""
        device = await self._device(request)
        try:
            updated = await self.ctx.agent_links.polling.report(device, read_object(request,
                                                                          optional=True))
        except PollRefused as exc:
            raise ApiError(exc.status, exc.message) from None
        return self.ctx.agent_links.polling.view(updated)

    @app.route("/heartbeat", methods=["POST"])
    @json_route
    async def heartbeat(self, request: Any) -> dict[str, Any]:
        """A device's heartbeat (long-poll transport)."""
        device = await self._device(request)
        try:
            await self.ctx.agent_links.polling.report(device, read_object(request, optional=True))
        except PollRefused as exc:
            raise ApiError(exc.status, exc.message) from None
        return {"ok": True, "device_id": device.id}

    @app.route("/tasks/next", methods=["GET"])
    @json_route
    async def next_task(self, request: Any) -> dict[str, Any]:
        """The device's next task, waiting up to 25 s (``{"task": null}`` when none came)."""
        device = await self._device(request)
        try:
            return await self.ctx.agent_links.polling.next_task(device)
        except PollRefused as exc:
            raise ApiError(exc.status, exc.message) from None
        except CancelledError:
            # the client left: nothing is written; a task claimed meanwhile was given back
            return {"task": None}

    @app.route("/tasks/<task_id>/result", methods=["POST"])
    @json_route
    async def result(self, request: Any, task_id: str) -> dict[str, Any]:
        """A task's result from the device that runs it (ignored when it is not running)."""
        device = await self._device(request)
        try:
            return await self.ctx.agent_links.polling.result(
                device, task_id, read_object(request, limit=RESULT_LIMIT))
        except PollRefused as exc:
            raise ApiError(exc.status, exc.message) from None
