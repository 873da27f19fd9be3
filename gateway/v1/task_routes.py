"""The /v1 task routes (gateway contract §1, §13): create and query, matched by path pattern.

``GatewayResource`` dispatches exact (method, path) pairs from its table and asks
``TaskRoutes.match`` for anything else, because query routes carry our task id in the path.
A query answers from the stored row at once; for an open task it only nudges the poller
(the task becomes due now), it never waits on the upstream.  A task that is not the caller's
answers 404 exactly like a missing one.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any
from urllib.parse import unquote

import orjson
from twisted.logger import Logger

from gateway import errors
from gateway.auth import authenticate
from gateway.context import GatewayContext
from gateway.errors import GatewayError
from gateway.limits import global_identity
from gateway.store import tasks as store
from gateway.v1.request_io import write_error, write_json_bytes
from gateway.v1.tasks import views
from gateway.v1.tasks.bodies import ARTJOB_ACTIONS
from gateway.v1.tasks.poller import TaskPoller
from gateway.v1.tasks.status import TERMINAL
from gateway.v1.tasks.submit import DEFAULT_TTL, FIRST_POLL, TaskCall, TaskRoute

log = Logger()
Handler = Callable[[GatewayContext, Any], Coroutine[Any, Any, None]]

VIDEO_PREFIXES = ("/v1/video/generations", "/v1/videos/image2video", "/v1/video/tasks",
                  "/v1/videos/tasks")
#: compatible create routes (kind video) with an exact path
COMPAT_CREATE = ("/v1/videos/generations", "/v1/clipgen2/private-avatar")
ARTJOB_CREATE = ("/v1/artjob/generations", "/v1/artjob/generations/imagine")
#: query prefix -> projection
COMPAT_QUERIES = {"/v1/videos/generations/": "wrapped", "/v1/tasks/": "wrapped",
                  "/v1/images/generations/": "image", "/v1/artjob/": "artjob"}
#: ``/v1/videos/<parent id>/remix``: a compatible create whose parent task id is in the path
REMIX = ("/v1/videos/", "/remix")


class TaskRoutes:
    """The ``fallback`` matcher of ``GatewayResource`` for every task route."""

    def __init__(self, poller: TaskPoller | None = None) -> None:
        #: also the source of the task lifetime and first-poll delay (read per submission)
        self.poller = poller

    def match(self, method: bytes, raw_path: bytes) -> Handler | None:
        path = raw_path.decode("latin-1")
        if method == b"POST":
            if path in VIDEO_PREFIXES:
                return self._create(TaskRoute("video", "video", path))
            if path in COMPAT_CREATE:
                return self._create(TaskRoute("compat", "video", path))
            if path in ARTJOB_CREATE or (
                    path.startswith(ARTJOB_CREATE[0] + "/")
                    and path[len(ARTJOB_CREATE[0]) + 1:] in ARTJOB_ACTIONS):
                return self._create(TaskRoute("compat", "artjob", path, "artjob"))
            if path.startswith(REMIX[0]) and path.endswith(REMIX[1]):
                parent = unquote(path[len(REMIX[0]):-len(REMIX[1])])
                if parent and "/" not in parent:
                    return self._create(TaskRoute("compat", "video", path), parent)
            return None
        if method != b"GET":
            return None
        for prefix in VIDEO_PREFIXES:
            task_id = _tail(path, prefix + "/")
            if task_id:
                return self._query(task_id, "video")
        for prefix, view in COMPAT_QUERIES.items():
            task_id = _tail(path, prefix)
            if task_id:
                return self._query(task_id, view)
        return None

    def _create(self, route: TaskRoute, parent: str | None = None) -> Handler:
        async def handle(ctx: GatewayContext, request: Any) -> None:
            poller = self.poller
            await TaskCall(ctx, request, route,
                           ttl=poller.task_ttl if poller else DEFAULT_TTL,
                           first_poll=poller.interval if poller else FIRST_POLL,
                           parent_id=parent).run()

        return handle

    def _query(self, task_id: str, view: str) -> Handler:
        async def handle(ctx: GatewayContext, request: Any) -> None:
            try:
                body = await self._answer(ctx, request, task_id, view)
            except GatewayError as error:
                write_error(request, errors.OPENAI, error)
                return
            except Exception:
                log.failure("task query failed")
                write_error(request, errors.OPENAI, errors.internal("Failed to load task"))
                return
            write_json_bytes(request, 200, orjson.dumps(body))

        return handle

    async def _answer(self, ctx: GatewayContext, request: Any, task_id: str,
                      view: str) -> dict[str, Any]:
        if not ctx.settings.flag("token_api_enabled"):
            raise errors.gateway_disabled()
        caller = await authenticate(ctx, request)
        verdict = await ctx.limiter.check_global(
            global_identity(caller.key_id, caller.user.id, caller.ip))
        if verdict.error is not None:
            raise verdict.error
        row = await ctx.db.transaction(store.load, task_id, caller.user.id)
        if row is None:
            raise errors.video_task_not_found() if view == "video" else errors.task_not_found()
        if row["status"] not in TERMINAL and row["status_path"]:
            await ctx.db.transaction(store.nudge, task_id, ctx.now())
            if self.poller is not None:
                self.poller.wake()
        if view == "video":
            return views.video_record(row)
        data = views.compat_data(row)
        if view == "artjob":
            return views.artjob_view(row)
        if view == "image":
            images = data.get("result", {}).get("images") or []
            urls = [u for item in images for u in (item.get("url") or [])]
            if urls:
                data["url"] = urls[0]
            return data
        return {"code": 200, "data": data}


def templates() -> list[tuple[str, str]]:
    """Every ``(method, path template)`` that ``TaskRoutes.match`` accepts, built from the same
    constants it matches on (``{id}`` for our task id, ``{action}`` for an artjob action); the
    OpenAPI document reads the task routes from here."""
    created = [*VIDEO_PREFIXES, *COMPAT_CREATE, *ARTJOB_CREATE,
               f"{ARTJOB_CREATE[0]}/{{action}}", f"{REMIX[0]}{{id}}{REMIX[1]}"]
    queried = [f"{prefix}/{{id}}" for prefix in VIDEO_PREFIXES]
    queried += [f"{prefix}{{id}}" for prefix in COMPAT_QUERIES]
    return [("POST", path) for path in created] + [("GET", path) for path in queried]


def _tail(path: str, prefix: str) -> str | None:
    if not path.startswith(prefix):
        return None
    rest = unquote(path[len(prefix):])
    return rest if rest and "/" not in rest else None
