"""Gateway request and answer shapes the gateway contract fixes (§1, §11-§13).

A relayed upstream answer has no shape of ours and stays an open object.
"""

from __future__ import annotations

from typing import Any

from console.openapi.json_schema import (
    AMOUNT,
    ANY,
    ARRAY,
    BINARY_FILE,
    BOOLEAN,
    INTEGER,
    OPEN_OBJECT,
    STRING,
    array_of,
    obj,
)
from gateway.v1 import task_routes

JSON = "application/json"
MULTIPART = "multipart/form-data"
#: remain/used credits: a decimal string, or the number -1 for an unlimited quota (§11.1)
CREDITS: dict[str, Any] = {"oneOf": [AMOUNT, {"const": -1}, {"const": 0}]}
MODEL_ACTION_BODY = obj(contents=ARRAY)
TASK_CREATED = obj(("code", "data"), code={"const": 200}, data=array_of(obj(
    ("status", "task_id"), status=STRING, task_id=STRING)))
VIDEO_TASK = obj(("id", "object", "model", "status", "cost", "created_at", "updated_at"),
                 id=STRING, object={"const": "video.generation"}, model=STRING, status=STRING,
                 cost=AMOUNT, upstream_id=STRING, created_at=INTEGER, updated_at=INTEGER,
                 upstream_response=ANY, data=ARRAY)
TASK_DATA = obj(("id", "task_id", "status", "progress"), id=STRING, task_id=STRING,
                status=STRING, cost=AMOUNT, credits_cost=AMOUNT, progress={"type": "number"},
                result=OPEN_OBJECT, created=INTEGER, upstream_id=STRING,
                upstream_response=ANY, completed=INTEGER, actual_time=INTEGER,
                error=OPEN_OBJECT)

REQUEST_BODIES: dict[tuple[str, str], tuple[str, dict[str, Any]]] = {
    ("POST", "/v1/chat/completions"): (JSON, obj(
        ("model", "messages"), model=STRING, messages=ARRAY, stream=BOOLEAN)),
    ("POST", "/v1/completions"): (JSON, obj(("model",), model=STRING, prompt=ANY,
                                            stream=BOOLEAN)),
    ("POST", "/v1/responses"): (JSON, obj(("model",), model=STRING, input=ANY, stream=BOOLEAN)),
    ("POST", "/v1/messages"): (JSON, obj(("model", "messages"), model=STRING, messages=ARRAY,
                                         max_tokens=INTEGER, stream=BOOLEAN)),
    ("POST", "/v1/models/{modelAction}"): (JSON, MODEL_ACTION_BODY),
    ("POST", "/v1beta/models/{modelAction}"): (JSON, MODEL_ACTION_BODY),
    ("POST", "/v1/audio/speech"): (JSON, obj(model=STRING, input=STRING, voice=STRING)),
    ("POST", "/v1/moderations"): (JSON, obj(model=STRING, input=ANY)),
    ("POST", "/v1/audio/transcriptions"): (MULTIPART, obj(("file",), file=BINARY_FILE,
                                                          model=STRING)),
    ("POST", "/v1/images/edits"): (MULTIPART, obj(("model", "image"), image=BINARY_FILE,
                                                  model=STRING, prompt=STRING)),
    ("POST", "/v1/uploads/images"): (MULTIPART, obj(("file",), file=BINARY_FILE)),
    ("POST", "/v1/images/generations"): (JSON, obj(model=STRING, prompt=STRING)),
}

BALANCE = obj(("success", "remain_balance", "remain_credits", "used_balance", "used_credits"),
              success=BOOLEAN, remain_balance=AMOUNT, remain_credits=CREDITS,
              used_balance=AMOUNT, used_credits=CREDITS)
RESPONSES: dict[tuple[str, str], dict[str, Any]] = {
    ("GET", "/v1/balance"): {**BALANCE, "properties": {**BALANCE["properties"],
                                                       "unlimited_quota": BOOLEAN}},
    ("GET", "/v1/user/balance"): BALANCE,
    ("GET", "/v1/models"): obj(("object", "data"), object={"const": "list"}, data=array_of(obj(
        ("id", "object", "created", "owned_by"), id=STRING, object={"const": "model"},
        created=INTEGER, owned_by=STRING))),
    ("POST", "/v1/uploads/images"): obj(
        ("url", "filename", "content_type", "bytes", "created_at"), url=STRING,
        filename=STRING, content_type=STRING, bytes=INTEGER, created_at=INTEGER),
    ("GET", "/v1/tasks/{id}"): obj(("code", "data"), code={"const": 200}, data=TASK_DATA),
    ("GET", "/v1/videos/generations/{id}"): obj(("code", "data"), code={"const": 200},
                                                 data=TASK_DATA),
    ("GET", "/v1/images/generations/{id}"): {**TASK_DATA, "properties": {
        **TASK_DATA["properties"], "url": STRING}},
    ("GET", "/v1/artjob/{id}"): obj(
        ("id", "task_id", "status", "progress"), id=STRING, task_id=STRING, status=STRING,
        progress={"type": "number"}, cost=AMOUNT, credits_cost=AMOUNT,
        image_urls=array_of(STRING), grid_image_url=STRING, result=OPEN_OBJECT, buttons=ARRAY),
}
for _prefix in task_routes.VIDEO_PREFIXES:
    RESPONSES[("POST", _prefix)] = VIDEO_TASK
    RESPONSES[("GET", f"{_prefix}/{{id}}")] = VIDEO_TASK
#: compatible creates answer a task-created envelope or the relayed upstream body (§13.5)
for _path in (*task_routes.COMPAT_CREATE, *task_routes.ARTJOB_CREATE,
              f"{task_routes.ARTJOB_CREATE[0]}/{{action}}",
              f"{task_routes.REMIX[0]}{{id}}{task_routes.REMIX[1]}"):
    RESPONSES[("POST", _path)] = {"anyOf": [TASK_CREATED, OPEN_OBJECT]}

#: routes that answer a stream when the body asks for one (gateway contract §1)
STREAMING = frozenset({"/v1/chat/completions", "/v1/completions", "/v1/responses",
                       "/v1/messages", "/v1/models/{modelAction}",
                       "/v1beta/models/{modelAction}"})
#: routes whose success body is the upstream's bytes (§12.5)
BINARY = frozenset({"/v1/audio/speech"})
