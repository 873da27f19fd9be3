"""Turning an accepted upstream submission into a stored, charged task (one transaction).

Shared by the task routes (``submit.py``) and the image relay (``media_route``), whose upstream
may answer a generation with a task id instead of images.  The call's in-memory reservation
becomes the charge: ``Wallets.settling`` before the write and ``Wallets.settled`` with the
committed numbers after it -- the same hand-over the settler does -- so the wallet cache never
counts the money twice or loses it.  ``store.create`` writes the charge and the row together.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import Any

from twisted.logger import Logger

from gateway import errors
from gateway.billing.cost import Cost
from gateway.billing.usage import Usage
from gateway.metering import Priced
from gateway.store import tasks as store
from gateway.v1.call import GatewayCall
from gateway.v1.outcome import Served, settlement_record
from gateway.v1.tasks import bodies
from gateway.v1.tasks.status import (
    QUEUED,
    REFUNDED,
    SUCCEEDED,
    normalise,
    upstream_id,
    upstream_status,
)

log = Logger()


@dataclass(frozen=True)
class NewTask:
    """What an accepted submission leaves to store: the answer, the price and the family."""

    family: str
    kind: str
    model: str
    body: dict[str, Any]
    answer: Any
    #: the upstream status path without the id ("/v1/tasks/")
    status_prefix: str
    priced: Priced
    cost: Cost
    #: the usage the price was computed from (the usage-log row shows it)
    usage: Usage
    ttl: float
    first_poll: float


def new_task_id() -> str:
    return "vtask_" + secrets.token_hex(16)


async def persist(call: GatewayCall, new: NewTask) -> dict[str, Any]:
    """Charge ``new.cost`` and store the task; returns the stored row (500 if it failed)."""
    ctx = call.ctx
    task_id = new_task_id()
    found = upstream_id(new.answer)
    raw_status = upstream_status(new.answer)
    # no upstream id: the answer is the result itself; nothing to poll
    status = normalise(raw_status) if raw_status else (QUEUED if found else SUCCEEDED)
    now = ctx.now()
    candidate = new.priced.candidate
    user_id, key_id = call.log.user_id, call.log.api_key_id
    task = {
        "id": task_id, "user_id": user_id, "api_key_id": key_id,
        "family": new.family, "kind": new.kind,
        "user_channel_id": candidate.user_channel.id, "channel_id": candidate.channel.id,
        "config_id": candidate.config.id, "model_name": new.model,
        "upstream_task_id": (found or "")[:255],
        "status_path": new.status_prefix + bodies.segment(found) if found else "",
        "status": status, "upstream_status": (raw_status or "")[:64],
        "cost_nanos": new.cost.cost_nanos, "request": new.body, "first_response": new.answer,
        "last_response": new.answer,
        "next_poll_at": now + timedelta(seconds=new.first_poll),
        "expires_at": now + timedelta(seconds=new.ttl),
    }
    call.log.priced = new.priced
    call.log.first_byte_at = ctx.clock.seconds()
    record = replace(settlement_record(call.log, Served(new.usage), ctx.clock.seconds(), now),
                     request_id=task_id, cost=new.cost)
    reservation, call.reservation = call.reservation, None
    token = ctx.wallets.settling(reservation, user_id,
                                 reservation.key_id if reservation is not None else key_id,
                                 new.cost.cost_nanos)
    try:
        result = await ctx.db.transaction(store.create, task, record.row(), now)
    except Exception:
        ctx.wallets.settled(token)  # the 500 that follows is a refusal: settled at no cost
        log.failure("storing task {id} failed (upstream id {up})", id=task_id, up=found)
        raise errors.internal("Failed to save task") from None
    ctx.wallets.settled(token, result["balance_after_nanos"], result["spent_after_nanos"],
                        result["quota_nanos"], charged_nanos=result["charged_nanos"])
    if status in REFUNDED:
        ctx.wallets.forget_user(user_id)
        if key_id is not None:
            ctx.wallets.forget_key(key_id)
    row = await ctx.db.transaction(store.load, task_id)
    assert row is not None
    return row
