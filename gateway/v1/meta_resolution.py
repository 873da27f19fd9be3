"""The "resolve meta-model" step of the /v1 text pipeline (console contract §6.3, §0).

When the requested name is an enabled meta model, the key's ``allowed_models`` has already been
checked against that name; here its program is evaluated against the request's variables and
names the real model the request continues with, exactly as if the client had sent it
(routing, failover, translation, limits are the ordinary ones).  This step also decides what
the call reserves -- the worst case over every model the program can reach -- and what it
bills: the resolved model's prices (``actual``) or the meta model's own (``meta``).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from gateway import errors
from gateway.auth import Caller
from gateway.billing.money import from_nanos
from gateway.catalog.snapshot import CatalogSnapshot
from gateway.context import GatewayContext
from gateway.errors import GatewayError
from gateway.metamodels.compiled import MetaModel
from gateway.metamodels.evaluate import EvaluationError
from gateway.metamodels.program import Call
from gateway.metamodels.variables import RequestVariables
from gateway.metering import Priced
from gateway.protocols.request import ClientRequest
from gateway.store.meta_models import account_numbers
from gateway.v1.call import ClientLeftError, GatewayCall, reserve_or_refuse
from gateway.v1.meta_billing import meta_priced
from gateway.v1.meta_fanout import FanOut, ProgramRun
from gateway.v1.meta_reserve import MetaReserve
from gateway.v1.outcome import Outcome

if TYPE_CHECKING:
    from gateway.v1.text_route import TextCall

#: variables whose values live in the database, read only by programs that use them
ACCOUNT_VARIABLES = frozenset({"user.balance", "api_key.quota_remaining"})


@dataclass(frozen=True)
class MetaRoute:
    """What the program decided for one request."""

    meta: MetaModel
    #: the real model the request continues with (None: ``deliver`` answers instead)
    model: str | None
    #: what to reserve: the worst case over every model the program can reach
    reserve_nanos: int
    #: the request the call continues with (a ``synthesize`` adds the candidates' answers)
    request: ClientRequest
    #: a ``judge`` or ``parallel`` ran sub-calls: the final row is split at settlement
    fan_out: FanOut | None = None
    #: a hedged ``parallel``: relays the winning call's answer
    deliver: Callable[[], Coroutine[Any, Any, Outcome]] | None = None

    def priced(self, attempts: Sequence[Priced]) -> list[Priced]:
        """The attempts as billed: unchanged in ``actual`` mode; in ``meta`` mode every one
        bills the meta model's own prices (no multipliers) while the upstream still gets the
        resolved model."""
        return [meta_priced(self.meta, p) for p in attempts]

    def apply(self, call: GatewayCall) -> ClientRequest:
        """Label the call's usage-log row; the request the call continues with.

        A single call logs the real model with the meta name beside it (``actual``) or the
        meta name (``meta``; the config id still says which model served it).  After
        sub-calls the client's row carries the meta name and the final call gets its own
        sub-call row (``FanOut.split``).
        """
        call.log.meta_model_name = self.meta.model_name
        if self.fan_out is not None:
            call.split_record = self.fan_out.split
        elif not self.meta.bills_meta and self.model is not None:
            call.log.model_name = self.model
        return self.request


async def route_meta(call: TextCall, caller: Caller, meta: MetaModel,
                     client_request: ClientRequest,
                     draw: Callable[[], float] = random.random) -> MetaRoute:
    """Evaluate ``meta``'s program for this request: 400 (in the family's shape, by the
    caller) when it cannot decide.  A ``judge`` or ``parallel`` reserves first, then makes
    its sub-calls (``meta_fanout``)."""
    ctx = call.ctx
    variables = await _variables(ctx, caller, meta, client_request)
    try:
        step = meta.resolver.root(variables, draw)
    except EvaluationError as exc:
        raise errors.invalid_request(f"Meta model {meta.model_name}: {exc}") from None
    reserve = _reserve(ctx, caller, meta, client_request)
    if isinstance(step, Call):
        return MetaRoute(meta, step.model, reserve, client_request)
    call.reservation = await reserve_or_refuse(ctx, call.log.request_id, caller, reserve)
    run = ProgramRun(call, caller, meta, client_request, variables, draw)
    try:
        result = await run.run(step)
    except GatewayError:
        if call.client_gone:  # its hang-up cancelled the sub-calls: the client left
            raise ClientLeftError() from None
        raise
    return MetaRoute(meta, result.model, reserve, result.request, run.fan_out, result.deliver)


async def _variables(ctx: GatewayContext, caller: Caller, meta: MetaModel,
                     client_request: ClientRequest) -> CallVariables:
    personal = ctx.settings.text("system_mode") == "personal"
    variables = call_variables(ctx.catalog.snapshot, caller, client_request, personal)
    if meta.variables & ACCOUNT_VARIABLES:
        key = caller.key
        quota_limit = key.quota_limit_nanos if key is not None else 0
        balance, spent = await ctx.db.transaction(account_numbers, caller.user.id,
                                                  caller.key_id)
        remaining = (from_nanos(max(quota_limit - spent, 0))
                     if spent is not None and quota_limit > 0 else Decimal(0))
        variables["user.balance"] = Decimal(-1) if personal else from_nanos(balance)
        variables["api_key.quota_remaining"] = Decimal(-1) if personal else remaining
    return variables


def _quota_limit(caller: Caller, personal: bool) -> Decimal:
    limit = caller.key.quota_limit_nanos if caller.key is not None else 0
    return Decimal(-1) if personal else from_nanos(limit) if limit > 0 else Decimal(0)


def _user_id(variables: CallVariables) -> Decimal:
    return Decimal(variables.caller.user.id)


def _is_admin(variables: CallVariables) -> bool:
    return variables.caller.user.is_admin


def _user_group(variables: CallVariables) -> str:
    group = variables.snapshot.groups.get(variables.caller.user.primary_group_id)
    return group.name if group is not None else ""


def _key_name(variables: CallVariables) -> str:
    key = variables.caller.key
    return key.name if key is not None else ""


def _key_quota_limit(variables: CallVariables) -> Decimal:
    return _quota_limit(variables.caller, variables.personal)


class CallVariables(RequestVariables):
    """The variables of §6.3 but the two read from the database (``ACCOUNT_VARIABLES``),
    each computed when a condition first reads it (a route stops at its first true branch)."""

    __slots__ = ("caller", "personal", "snapshot")

    #: the request's variables and the caller's
    PRODUCERS: dict[str, Callable[[Any], Any]] = {
        **RequestVariables.PRODUCERS,
        "user.id": _user_id,
        "user.is_admin": _is_admin,
        "user.group": _user_group,
        "api_key.name": _key_name,
        "api_key.quota_limit": _key_quota_limit,
    }

    def __init__(self, snapshot: CatalogSnapshot, caller: Caller,
                 client_request: ClientRequest, personal: bool) -> None:
        super().__init__(client_request.body, len(client_request.raw), client_request.raw)
        self.snapshot, self.caller, self.personal = snapshot, caller, personal
        # the stream flag of a model-action call is in its path, not its body
        self["request.stream"] = client_request.stream


def call_variables(snapshot: CatalogSnapshot, caller: Caller, client_request: ClientRequest,
                   personal: bool) -> CallVariables:
    """The variables a program reads for this request, computed as it reads them."""
    return CallVariables(snapshot, caller, client_request, personal)


def _reserve(ctx: GatewayContext, caller: Caller, meta: MetaModel,
             client_request: ClientRequest) -> int:
    reserve = MetaReserve(
        ctx.catalog.snapshot, caller.user.id, caller.user.active_group_ids(ctx.now()),
        caller.key.allowed_user_channels if caller.key else (),
        ctx.settings.text("group_multiplier_mode"))
    return reserve.nanos(meta, client_request.estimated_input_tokens,
                         client_request.max_output_tokens, ctx.default_output_reserve)
