"""The Messages and model-action text routes (contract §1, §8.1): the /v1 text pipeline with
the client's own error envelope and request reading.

``POST /v1/messages`` and ``POST /v1[beta]/models/<model>:<action>`` run exactly the pipeline
of ``TextCall`` (authentication, limits, reservation, failover, relay, settlement); only how
the request is read and how errors are worded differ, so their official SDKs raise their typed
errors.  The model-action path is parsed here because the route table matches exact paths:
``gateway.resource`` hands every ``POST`` under ``/v1/models/`` and ``/v1beta/models/`` to
``model_action``.  A malformed segment or an unsupported action answers 404 -- after
authentication and the global limit, as §1 says.
"""

from __future__ import annotations

from typing import Any

from gateway import errors
from gateway.context import GatewayContext
from gateway.errors import GatewayError
from gateway.protocols import fields, google, messages
from gateway.protocols.errors import ProtocolError
from gateway.protocols.request import ClientRequest
from gateway.text_route import TextCall

MESSAGES_ENDPOINT = "/v1/messages"
MODEL_PREFIXES = (b"/v1/models/", b"/v1beta/models/")


class MessagesCall(TextCall):
    """``POST /v1/messages``: Messages request, Messages error envelope."""

    family = errors.MESSAGES

    def __init__(self, ctx: GatewayContext, request: Any) -> None:
        super().__init__(ctx, request, "messages", MESSAGES_ENDPOINT)

    def _parse(self, body: bytes) -> ClientRequest:
        try:
            parsed = fields.parse_object(body)
            model = fields.model_name(parsed)
            stream, max_output, estimate = messages.read_request(parsed)
        except ProtocolError as exc:
            raise GatewayError(exc.status, exc.message, type=exc.type, param=exc.param) from None
        return ClientRequest("messages", model, stream, True, max_output, estimate, parsed, body)


class ModelActionCall(TextCall):
    """``POST /v1[beta]/models/<model>:<action>``: model and stream flag from the path."""

    family = errors.MODELACTION

    def __init__(self, ctx: GatewayContext, request: Any, endpoint: str,
                 target: tuple[str, str] | None) -> None:
        super().__init__(ctx, request, "google", endpoint)
        self.target = target if target is not None and target[1] in google.ACTIONS else None

    async def _serve(self) -> None:
        if self.target is None:
            await self._caller()
            raise errors.not_found()
        await super()._serve()

    def _parse(self, body: bytes) -> ClientRequest:
        assert self.target is not None
        model, action = self.target
        try:
            parsed = fields.parse_object(body)
            max_output, estimate = google.read_request(parsed)
        except ProtocolError as exc:
            raise GatewayError(exc.status, exc.message, type=exc.type, param=exc.param) from None
        stream = action == "streamGenerateContent"
        return ClientRequest("google", model, stream, True, max_output, estimate, parsed, body)


async def messages_call(ctx: GatewayContext, request: Any) -> None:
    await MessagesCall(ctx, request).run()


async def model_action(ctx: GatewayContext, request: Any) -> None:
    """Every ``POST`` under ``/v1/models/`` or ``/v1beta/models/``."""
    path: bytes = request.path.rstrip(b"/")
    prefix = next(p for p in MODEL_PREFIXES if path.startswith(p))
    segment = path[len(prefix):].decode("utf-8", "replace")
    target = google.parse_model_action(segment)
    await ModelActionCall(ctx, request, path.decode("utf-8", "replace"), target).run()
