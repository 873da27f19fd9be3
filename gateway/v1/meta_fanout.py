"""Executing a meta model's ``judge`` and ``parallel`` steps (console contract §6.3.1).

- ``judge "m" { prompt "P" route { ... } }``: one sub-call asks ``m`` to classify the request;
  its trimmed answer is ``judge.answer`` while the route is resolved (which may lead to another
  step).
- ``parallel { ... } synthesize "s"``: the client's request, not streamed, goes to every call at
  once; ``s`` then answers the client's request plus one user message holding the candidate
  answers -- that last call is the client call itself, relayed (and streamed) as usual.
- ``parallel { ... }`` (hedging): every call starts at once; the first that starts a successful
  answer (response head for a stream, the whole body otherwise) wins and is relayed to the
  client; the others' sockets are closed at that moment, each billed what it had produced.

Every upstream call is a sub-call row ``<id>.<n>``; the client call's own row (``<id>``, the meta
name, the final answer's usage) is split from the final call's row by ``FanOut.split`` when the
client call settles: it costs 0 in ``actual`` mode (the sub-calls carry the costs) and the
meta price in ``meta`` mode (the sub-calls cost 0).
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import orjson
from twisted.internet.defer import Deferred, ensureDeferred

from gateway import errors
from gateway.auth import Caller
from gateway.errors import GatewayError
from gateway.ledger.settlement import SettlementRecord
from gateway.metamodels.compiled import MetaModel
from gateway.metamodels.evaluate import EvaluationError, Step
from gateway.metamodels.program import Call, Judge, Parallel
from gateway.metamodels.variables import JUDGE_ANSWER, request_variables
from gateway.protocols.answer_text import with_user_message
from gateway.protocols.request import CHAT, ClientRequest, parse_client_request
from gateway.v1.meta_billing import meta_priced
from gateway.v1.meta_subcalls import SubAnswer, SubCalls, cancelled
from gateway.v1.outcome import Outcome, Served
from gateway.v1.request_io import write_json_bytes

if TYPE_CHECKING:
    from gateway.v1.text_route import TextCall

JUDGE_PROMPT = "Classify the request below. Answer with one short label only."
SYNTHESIZE = "Synthesize one answer to the conversation above from these candidate answers:"


class FanOut:
    """The sub-calls of one client call, and how its final row is split at settlement."""

    def __init__(self, call: TextCall, caller: Caller, meta: MetaModel) -> None:
        self.calls = SubCalls(call, caller, meta)
        self.meta = meta
        #: the sub-call number and model of the call whose answer the client gets
        self.final_number: int | None = None
        self.final_model = ""

    def split(self, record: SettlementRecord) -> SettlementRecord:
        """Queue the final call's sub-call row; return the client's own row."""
        meta = self.meta
        if self.final_number is not None:
            self.calls.ctx.settler.settle_and_forget(None, replace(
                record, request_id=self.calls.sub_id(self.final_number),
                model_name=self.final_model, cost=None if meta.bills_meta else record.cost))
        return replace(record, model_name=meta.model_name, meta_model_name=meta.model_name,
                       cost=record.cost if meta.bills_meta else None)


@dataclass
class FanOutResult:
    """Where a fan-out program leaves the client call."""

    #: the model the client call now calls (None: ``deliver`` answers instead)
    model: str | None
    request: ClientRequest
    #: a hedged ``parallel``'s winner, relayed by the client call
    deliver: Callable[[], Coroutine[Any, Any, Outcome]] | None = None


class ProgramRun:
    """One request's walk through ``judge`` and ``parallel`` steps to the final call."""

    def __init__(self, call: TextCall, caller: Caller, meta: MetaModel,
                 request: ClientRequest, variables: dict[str, Any],
                 draw: Callable[[], float]) -> None:
        self.call = call
        self.meta = meta
        self.request = request
        self.variables = variables
        self.draw = draw
        self.fan_out = FanOut(call, caller, meta)

    async def run(self, step: Step) -> FanOutResult:
        while isinstance(step, Judge):
            self.variables[JUDGE_ANSWER] = await self._judge(step)
            try:
                step = self.meta.resolver.resolve(step.route, self.variables, self.draw)
            except EvaluationError as exc:
                raise errors.invalid_request(f"Meta model {self.meta.model_name}: {exc}"
                                             ) from None
        if isinstance(step, Call):
            return self._final(step.model, self.request)
        if step.synthesize is not None:
            return self._final(step.synthesize, await self._synthesis_request(step))
        return await self._hedge(step)

    def _final(self, model: str, request: ClientRequest) -> FanOutResult:
        self.fan_out.final_number = self.fan_out.calls.next_number()
        self.fan_out.final_model = model
        return FanOutResult(model, request)

    # --- judge ----------------------------------------------------------------------------

    async def _judge(self, judge: Judge) -> str:
        text = self.variables.get("request.text")
        if text is None:
            text = request_variables(self.request.body, len(self.request.raw),
                                     ["request.text"])["request.text"]
        prompt = judge.prompt if judge.prompt is not None else JUDGE_PROMPT
        body = orjson.dumps({"model": judge.model, "messages": [
            {"role": "user", "content": f"{prompt}\n\n{text}"}]})
        answer = await self.fan_out.calls.run(judge.model, parse_client_request(CHAT, body))
        if answer.error is not None:
            raise answer.error
        return answer.text.strip()

    # --- parallel -------------------------------------------------------------------------

    def _not_streamed(self) -> ClientRequest:
        body = {k: v for k, v in self.request.body.items()
                if k not in ("stream", "stream_options")}
        return replace(self.request, stream=False, wants_usage_in_stream=False, body=body,
                       raw=orjson.dumps(body))

    async def _synthesis_request(self, parallel: Parallel) -> ClientRequest:
        request = self._not_streamed()
        calls = self.fan_out.calls
        answers: list[SubAnswer] = await _all([calls.run(c.model, request)
                                               for c in parallel.calls])
        good = [a for a in answers if a.ok]
        if not good:
            raise _first_error(answers)
        text = SYNTHESIZE + "".join(f"\n\n[{a.model}]\n{a.text}" for a in good)
        body = with_user_message(self.request.family, self.request.body, text)
        synthesis = self.call._parse(orjson.dumps(body))
        self.call.input_tokens = synthesis.estimated_input_tokens
        return synthesis

    async def _hedge(self, parallel: Parallel) -> FanOutResult:
        calls = self.fan_out.calls
        stream = self.request.stream
        request = self.request if stream else self._not_streamed()
        if stream:
            starts = [calls.open(calls.next_number(), c.model, request)
                      for c in parallel.calls]
        else:
            starts = [calls.run(c.model, request, settle=False) for c in parallel.calls]
        winner = await _first_success(starts, self._lost)
        calls.cancel(keep=winner.response)
        self.fan_out.final_number = winner.number
        self.fan_out.final_model = winner.model
        return FanOutResult(None, self.request, lambda: self._deliver(winner))

    def _lost(self, answer: SubAnswer) -> None:
        """A hedging call that did not win, once it ended: its row written with what it had
        produced.  A stream whose answer had started is closed unrelayed (nothing produced
        reached us); a failed stream wrote its own row."""
        calls = self.fan_out.calls
        if not self.request.stream:
            calls.settle(answer)  # failed, cancelled, or a whole answer just too late
        elif answer.response is not None:
            answer.response.abort()
            answer.outcome = cancelled()
            calls.settle(answer)

    async def _deliver(self, winner: SubAnswer) -> Outcome:
        """Relay the winning call's answer as the client call's own: its outcome is the
        client call's (a stream that fails before its first byte reached the client is
        final here -- the hedge already chose -- and answered as an error)."""
        call = self.call
        assert winner.priced is not None
        call.log.priced = meta_priced(self.meta, winner.priced)
        if winner.response is not None and winner.translator is not None:
            call._response = winner.response  # a client hang-up closes it
            return await call._relay_stream(winner.translator, winner.response)
        assert isinstance(winner.outcome, Served)
        call.log.first_byte_at = winner.log.first_byte_at
        if not call.client_gone:  # gone: the upstream produced it all the same, so it bills
            write_json_bytes(call.request, 200, winner.body,
                             [(b"content-type", b"application/json")]
                             + [(k.encode(), v.encode())
                                for k, v in call.extra_headers.items()])
        return winner.outcome


async def _all(starts: list[Coroutine[Any, Any, SubAnswer]]) -> list[SubAnswer]:
    """Run every sub-call at once; their answers in declaration order."""
    pending = [ensureDeferred(start) for start in starts]
    return [await d for d in pending]


def _first_error(answers: list[SubAnswer]) -> GatewayError:
    return next((a.error for a in answers if a.error is not None), errors.no_channel())


async def _first_success(starts: list[Coroutine[Any, Any, SubAnswer]],
                         lost: Callable[[SubAnswer], None]) -> SubAnswer:
    """The first sub-call to succeed; every other one goes to ``lost`` when it ends (all
    failing: the first error in declaration order)."""
    done: Deferred[SubAnswer] = Deferred()
    landed: list[SubAnswer | None] = [None] * len(starts)

    def land(answer: SubAnswer, index: int) -> None:
        landed[index] = answer
        if answer.ok and not done.called:
            done.callback(answer)
            return
        if done.called:
            lost(answer)
        elif all(a is not None for a in landed):
            failed = [a for a in landed if a is not None]
            for other in failed:
                lost(other)
            done.errback(_first_error(failed))

    for index, start in enumerate(starts):
        ensureDeferred(start).addCallback(land, index)
    winner = await done
    for answer in landed:
        if answer is not None and answer is not winner:
            lost(answer)
    return winner
