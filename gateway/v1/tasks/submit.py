"""Submitting an async task: price it, hold the price, call the upstream once, store the task.

Order (gateway contract §13.4-§13.5, ours ⚑ where the origin differs): authenticate -> model ->
first candidate (a task is never sent to a second channel: an upstream may have accepted a job
whose answer we lost) -> channel type -> price (400 for a billing tier not offered, before any
upstream call) -> hold the full price in the wallet (402, no upstream call) -> upstream POST ->
on acceptance one transaction charges the price and stores the task (``store.create``).  Any
exit before that settles through ``GatewayCall`` at zero cost, so a refused submit is free.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any

import orjson

from gateway import errors
from gateway.auth import Caller
from gateway.billing.cost import Cost
from gateway.billing.usage import Usage
from gateway.catalog.snapshot import normalize_model_name
from gateway.channels.channel_types import normalise_channel_type
from gateway.channels.http import BodyTooLarge, UpstreamError
from gateway.channels.upstream_url import join, json_headers
from gateway.context import GatewayContext
from gateway.metering import Priced
from gateway.store import tasks as store
from gateway.v1.call import GatewayCall, reserve_or_refuse
from gateway.v1.outcome import Outcome, Served
from gateway.v1.request_io import read_body, write_json_bytes
from gateway.v1.tasks import bodies, views
from gateway.v1.tasks.create import NewTask, persist
from gateway.v1.tasks.pricing import task_cost

MAX_ANSWER = 4 << 20
#: how long a task may stay open before the poller expires (and refunds) it
DEFAULT_TTL = 24 * 3600.0
#: first poll this long after submission (the poller's interval is the usual value)
FIRST_POLL = 5.0


@dataclass(frozen=True)
class TaskRoute:
    """One create route: ``family`` video (task record answer) or compat (envelope answer)."""

    family: str
    kind: str
    path: str
    default_model: str | None = None


class TaskCall(GatewayCall):
    """POST of a task family route."""

    def __init__(self, ctx: GatewayContext, request: Any, route: TaskRoute, *,
                 ttl: float = DEFAULT_TTL, first_poll: float = FIRST_POLL,
                 parent_id: str | None = None) -> None:
        super().__init__(ctx, request, route.path)
        self.route = route
        self.ttl = ttl
        self.first_poll = first_poll
        self.parent_id = parent_id
        self.stored = False

    async def _serve(self) -> Outcome:
        caller = await self._caller()
        body = self._body()
        model = (body.get("model") or body.get("model_name") or body.get("modelName")
                 or self._default_model())
        if not isinstance(model, str) or not model.strip():
            raise errors.model_not_specified()
        model = normalize_model_name(model)
        self._check_model(caller, model)
        priced = (await self._plan(caller, model))[0]
        channel = priced.candidate.channel
        channel_type = normalise_channel_type(channel.type)
        if self.route.kind == "artjob":
            if channel_type not in bodies.ARTJOB_TYPES:
                raise errors.unsupported_upstream(
                    "Artjob generation is only supported for artjob upstream channels")
        elif channel_type not in bodies.VIDEO_TYPES:
            raise errors.unsupported_upstream(
                "Video generation is only supported for video upstream channels")
        cost, usage = task_cost(priced, body)
        await self._hold(caller, priced, cost.cost_nanos)
        self.log.priced, self.planned_usage = priced, usage
        upstream_model = priced.candidate.upstream_model
        path = self.route.path
        if self.parent_id is not None:
            parent = await self.ctx.db.transaction(store.load, self.parent_id, caller.user.id)
            parent_up = (parent["upstream_task_id"] if parent else "") or self.parent_id
            body = {**body, "parent_task_id": parent_up}
            path = f"/v1/videos/{bodies.segment(parent_up)}/remix"
        settings = self.ctx.settings
        if self.route.kind == "artjob":
            path, up_body, status_prefix = bodies.artjob(
                path, body, upstream_model, settings.text("artjob_upstream_path_prefix"))
        elif self.route.family == "video":
            path, up_body, status_prefix = bodies.video_family(channel_type, body,
                                                               upstream_model)
        else:
            path, up_body, status_prefix = bodies.compat_video(
                channel_type, path, body, upstream_model,
                settings.text("clipgen2_upstream_path_prefix"))
        answer = await self._submit(channel, channel_type, path, up_body)
        await self._store(priced, cost, usage, model, body, answer, status_prefix)
        return Served(usage)  # charged by the task's own transaction (see _settle)

    def _default_model(self) -> str | None:
        """The route's default model; clipgen2's is a setting (gateway contract §13.5)."""
        if self.route.path.startswith(bodies.CLIPGEN2_PREFIX + "/"):
            return self.ctx.settings.text("clipgen2_default_model") or None
        return self.route.default_model

    def _body(self) -> dict[str, Any]:
        raw = read_body(self.request, self.ctx.max_body_bytes)
        try:
            body = orjson.loads(raw)
        except orjson.JSONDecodeError:
            raise errors.invalid_body() from None
        if not isinstance(body, dict):
            raise errors.invalid_body()
        return body

    async def _hold(self, caller: Caller, priced: Priced, amount: int) -> None:
        self.reservation = await reserve_or_refuse(self.ctx, self.log.request_id, caller,
                                                   amount)
        await self._check_user_channel(caller, priced.candidate.user_channel)

    async def _submit(self, channel: Any, channel_type: str, path: str,
                      body: dict[str, Any]) -> Any:
        url = join(channel.base_url, path)
        response = await self._open_upstream(
            channel, url, json_headers(channel_type, channel.api_key), orjson.dumps(body),
            self.ctx.timeouts.first_byte)
        try:
            raw = await response.read_all(MAX_ANSWER, idle_timeout=self.ctx.timeouts.stream_idle)
        except (UpstreamError, BodyTooLarge):
            if response.code >= 400:
                raise (await self._refusal(channel, response, b"")).error from None
            raise errors.upstream_read_failed() from None
        if response.code >= 400:
            raise (await self._refusal(channel, response, raw)).error
        self.ctx.health.record_success(channel.id)
        content_type = (response.header(b"content-type") or b"").lower()
        if content_type.startswith(b"text/event-stream"):
            raise errors.unsupported_stream()
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError:
            raise errors.upstream_failed() from None

    async def _store(self, priced: Priced, cost: Cost, usage: Usage, model: str,
                     body: dict[str, Any], answer: Any, status_prefix: str) -> None:
        row = await persist(self, NewTask(
            family=self.route.family, kind=self.route.kind, model=model, body=body,
            answer=answer, status_prefix=status_prefix, priced=priced, cost=cost, usage=usage,
            ttl=self.ttl, first_poll=self.first_poll))
        self.stored = True
        if self.route.family == "video":
            payload = views.video_record(row)
        elif row["upstream_task_id"]:
            payload = {"code": 200, "data": [{"status": "submitted", "task_id": row["id"]}]}
        else:
            payload = answer  # no task upstream: the answer is the result (billed, not polled)
        write_json_bytes(self.request, 200, orjson.dumps(payload))

    def _settle(self, outcome: Outcome) -> None:
        if self.stored:
            return  # charged in the task's own transaction
        with contextlib.suppress(Exception):
            super()._settle(outcome)
