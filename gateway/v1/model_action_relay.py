"""``:countTokens``, ``:embedContent`` and ``:batchEmbedContents`` for ``modelaction`` channels.

Neither has a counterpart in the other protocols, so there is no translation: the body goes to
the channel's ``/v1beta/models/<upstream model>:<action>`` unchanged and the answer comes back
as the upstream sent it.  ``countTokens`` is not billed (it only counts, contract §8.1 "MAY
forward countTokens unbilled") but is logged at zero cost; the embedding actions are billed on
their input tokens (the upstream reports none, so they are estimated from the texts, §10.3).  Any
other channel type answers 400, since it cannot serve these actions.
"""

from __future__ import annotations

from typing import Any

import orjson

from gateway import errors
from gateway.billing.usage import Usage
from gateway.catalog.snapshot import normalize_model_name
from gateway.channels.channel_types import normalise_channel_type
from gateway.channels.http import BodyTooLarge, UpstreamError
from gateway.channels.upstream_url import join, json_headers, relayable_headers
from gateway.context import GatewayContext
from gateway.protocols.estimate import estimate_texts
from gateway.v1.call import GatewayCall
from gateway.v1.outcome import Outcome, Served, UpstreamFailed
from gateway.v1.request_io import read_body, write_json_bytes

ACTIONS = ("countTokens", "embedContent", "batchEmbedContents")
MAX_ANSWER = 16 << 20


def _texts(value: Any) -> list[str]:
    """Every ``text`` inside a Google body (contents, parts, requests...)."""
    if isinstance(value, dict):
        found = [value["text"]] if isinstance(value.get("text"), str) else []
        for key, item in value.items():
            if key != "text":
                found.extend(_texts(item))
        return found
    if isinstance(value, list):
        return [text for item in value for text in _texts(item)]
    return []


def _with_model(body: dict[str, Any], model: str) -> dict[str, Any]:
    """The body with every ``model`` field (top level, and per batch request) set to ours."""
    out = dict(body)
    if isinstance(out.get("model"), str):
        out["model"] = model
    if isinstance(out.get("requests"), list):
        out["requests"] = [{**item, "model": model} if isinstance(item, dict) else item
                           for item in out["requests"]]
    return out


class ModelActionRelayCall(GatewayCall):
    family = errors.MODELACTION

    def __init__(self, ctx: GatewayContext, request: Any, endpoint: str, model: str,
                 action: str) -> None:
        super().__init__(ctx, request, endpoint)
        self.model = model
        self.action = action

    async def _serve(self) -> Outcome:
        caller = await self._caller()
        raw = read_body(self.request, self.ctx.max_body_bytes)
        try:
            body = orjson.loads(raw) if raw.strip() else {}
        except orjson.JSONDecodeError:
            raise errors.invalid_body() from None
        if not isinstance(body, dict):
            raise errors.invalid_body()
        model = normalize_model_name(self.model)
        self._check_model(caller, model)
        attempts = [p for p in await self._plan(caller, model)
                    if normalise_channel_type(p.candidate.channel.type) == "modelaction"]
        if not attempts:
            raise errors.unsupported_upstream(
                f"{self.action} is only supported on modelaction channels")
        priced = attempts[0]
        self.input_tokens = estimate_texts(_texts(body))
        billed = self.action != "countTokens"
        if billed:
            await self._admit(caller, attempts[:1], self.input_tokens, 0)
        self.log.priced = priced
        channel = priced.candidate.channel
        url = join(channel.base_url,
                   f"/v1beta/models/{priced.candidate.upstream_model}:{self.action}")
        upstream_body = _with_model(body, f"models/{priced.candidate.upstream_model}")
        response = await self._open_upstream(
            channel, url, json_headers("modelaction", channel.api_key),
            orjson.dumps(upstream_body), self.ctx.timeouts.first_byte)
        if response.code >= 400:
            return await self._refusal(channel, response)
        self.ctx.health.record_success(channel.id)
        try:
            answer = await response.read_all(MAX_ANSWER,
                                             idle_timeout=self.ctx.timeouts.stream_idle)
        except (UpstreamError, BodyTooLarge):
            return UpstreamFailed(errors.upstream_read_failed())
        self.log.first_byte_at = self.ctx.clock.seconds()
        write_json_bytes(self.request, response.code, answer,
                         relayable_headers(response.headers))
        return Served(Usage(input=self.input_tokens, estimated=True) if billed else None)
