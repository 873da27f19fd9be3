"""Image generations whose upstream answers with a task instead of images (contract §13.5).

``POST /v1/images/generations`` is a synchronous relay (``gateway/v1/media_route.py``); when the
upstream's answer carries a task id and no images, the relay hands it here: the price the relay
would have settled becomes the task's held charge, a task of kind ``image`` is stored (polled at
``/v1/tasks/<upstream id>``), and the client gets the task-created envelope.  Query it with
``GET /v1/images/generations/:id``.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import orjson

from gateway.billing.cost import compute_cost
from gateway.billing.usage import Usage
from gateway.v1.call import GatewayCall
from gateway.v1.tasks.create import NewTask, persist
from gateway.v1.tasks.pricing import ONE_MILLION, count_of
from gateway.v1.tasks.status import upstream_id
from gateway.v1.tasks.submit import DEFAULT_TTL, FIRST_POLL

STATUS_PREFIX = "/v1/tasks/"


def task_answer(answer: bytes) -> Any | None:
    """The parsed answer when it announces a task (an id and no images), else None."""
    try:
        parsed = orjson.loads(answer)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(parsed, dict):
        return None
    data = parsed.get("data")
    if isinstance(data, list) and data and not upstream_id({"data": data}):
        return None
    if isinstance(data, list) and any(
            isinstance(item, dict) and (item.get("url") or item.get("b64_json"))
            for item in data):
        return None
    return parsed if upstream_id(parsed) else None


async def store_image_task(call: GatewayCall, fields: dict[str, Any], parsed: Any,
                           usage: Usage) -> bytes:
    """Store the task (charging what the relay would have) and return the answer body."""
    priced = call.log.priced
    assert priced is not None
    # a task answer lists no images yet: price the images the client asked for
    images = count_of(fields) * ONE_MILLION
    usage = replace(usage, output=images, image_out=images)
    cost = compute_cost(usage, priced.prices, priced.effective.group_multiplier,
                        priced.effective.user_channel_multiplier)
    row = await persist(call, NewTask(
        family="compat", kind="image", model=call.log.model_name, body=fields,
        answer=parsed, status_prefix=STATUS_PREFIX, priced=priced, cost=cost, usage=usage,
        ttl=DEFAULT_TTL, first_poll=FIRST_POLL))
    return orjson.dumps({"code": 200, "data": [{"status": "submitted", "task_id": row["id"]}]})
