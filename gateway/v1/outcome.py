"""How a metered /v1 call ended: one immutable value per exit, settled in one place.

Whether an exit bills used to be the order of a dozen writes to the call's log fields; now an
attempt (or the call's refusal) returns one of the values below, and ``GatewayCall.run`` turns
it into the usage-log row and the settlement (``settlement_record``) and, for an error that
reached nobody yet, into the client's error answer.  Each value says three things:

- ``status`` / ``message``: what the usage log records (0 = success in the row);
- ``billed``: the usage the user pays for (None = nothing is charged).  The rule is "what
  was delivered is billed" (DESIGN.md: a failure after the first byte is billed for what was
  delivered): a whole answer, the part of a stream that went out before it failed, was cut
  or ended early, or an answer the upstream produced for a client that left;
- ``verdict``: what the attempt loop does next -- ``RETRYABLE`` (nothing reached the client
  and the next candidate may serve: fail over), ``REFUSED`` (final, nothing was produced), or
  ``ACCEPTED`` (the upstream took the call and produced an answer, whole or partial: never
  retried, since a retry could do the work twice).

The exits (gateway contract §0, §6.3, §9.4; operations contract §6):

==================  ==========================================  ========  ==========
value               exit                                        status    billed
==================  ==========================================  ========  ==========
``Served``          the whole answer went out                   upstream  its usage
``Refused``         refused by us or by the upstream's status   error's   nothing
``UpstreamFailed``  no usable answer before the first byte      error's   nothing
``ClientLeft``      the client hung up                          499       if produced
``StreamFailed``    the upstream failed after the first byte    502       delivered
``StreamEndedEarly``the stream closed without its end marker    502       delivered
``Cut``             the process stopped at the end of its grace 503       delivered
==================  ==========================================  ========  ==========

"Stream ended before its end marker" (``StreamEndedEarly``): the upstream closed its stream
cleanly after some events but never sent its protocol's end (``[DONE]``, ``message_stop``,
``response.completed``, a ``finishReason``).  The client gets one native error event (its
family's, §9.4; none is added when the upstream's own error event already went out), the row
says 502 "upstream stream ended before completion", and what was delivered is billed.  A
stream that closes before anything reached the client is an ``UpstreamFailed`` instead: the
next candidate may serve, and nothing is billed.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Final

from gateway import errors
from gateway.billing.usage import Usage
from gateway.errors import GatewayError
from gateway.frozen_init import direct_init
from gateway.ledger.settlement import SettlementRecord
from gateway.metering import RequestLog

#: fail over to the next candidate: nothing reached the client, nothing was produced for it
RETRYABLE: Final = "retryable"
#: final, and nothing was produced: answer the error, bill nothing
REFUSED: Final = "refused"
#: the upstream produced an answer (whole or in part): never retried
ACCEPTED: Final = "accepted"

ENDED_EARLY_MESSAGE = "upstream stream ended before completion"
CLIENT_LEFT_MESSAGE = "client disconnected"
CUT_MESSAGE = "stream cut: the server is shutting down"


@direct_init
@dataclass(frozen=True)
class Served:
    """The whole answer went out (a stream with its end marker, or a whole body) -- also
    when the client left after the upstream produced it: it was produced, so it is billed."""

    #: None: the call is free by its nature (``countTokens``), logged at no cost
    usage: Usage | None
    #: the upstream's status, relayed
    status: int = 200

    @property
    def message(self) -> str:
        return ""

    @property
    def billed(self) -> Usage | None:
        return self.usage

    @property
    def verdict(self) -> str:
        return ACCEPTED


@dataclass(frozen=True)
class Refused:
    """An error answer with nothing produced: our own refusal (401, 400, 402, 429, 503...) or
    the upstream's error status mapped to the client's error (``retryable`` when another
    channel may not fail the same way: 401/403/429/5xx, or a channel type that cannot take
    the request)."""

    error: GatewayError
    retryable: bool = False
    #: usage known before the upstream answered (a task's priced usage): logged, not billed
    logged: Usage | None = None

    @property
    def status(self) -> int:
        return self.error.status

    @property
    def message(self) -> str:
        return self.error.message

    @property
    def billed(self) -> Usage | None:
        return None

    @property
    def verdict(self) -> str:
        return RETRYABLE if self.retryable else REFUSED


@dataclass(frozen=True)
class UpstreamFailed:
    """No usable answer before the first byte reached the client: no connection, no
    response head in time, an unreadable answer, or a stream that failed or closed before
    its first event.  Another candidate may serve; nothing is billed."""

    error: GatewayError

    @property
    def status(self) -> int:
        return self.error.status

    @property
    def message(self) -> str:
        return self.error.message

    @property
    def billed(self) -> Usage | None:
        return None

    @property
    def verdict(self) -> str:
        return RETRYABLE


@dataclass(frozen=True)
class ClientLeft:
    """The client hung up.  ``usage``: what the upstream produced until then (None: it had
    produced nothing); ``delivered``: part of it went out, so it is billed."""

    usage: Usage | None = None
    delivered: bool = False

    @property
    def status(self) -> int:
        return 499

    @property
    def message(self) -> str:
        return CLIENT_LEFT_MESSAGE

    @property
    def billed(self) -> Usage | None:
        return self.usage if self.delivered else None

    @property
    def verdict(self) -> str:
        return ACCEPTED if self.delivered else REFUSED


@dataclass(frozen=True)
class StreamFailed:
    """The upstream failed after the first byte (transport error, idle timeout, unreadable
    event): the client got one native error event; what was delivered is billed."""

    usage: Usage
    #: what failed (the exception's name), for the log
    reason: str

    @property
    def status(self) -> int:
        return 502

    @property
    def message(self) -> str:
        return f"stream failed: {self.reason}"

    @property
    def billed(self) -> Usage | None:
        return self.usage

    @property
    def verdict(self) -> str:
        return ACCEPTED


@dataclass(frozen=True)
class StreamEndedEarly:
    """The upstream's stream closed without its protocol's end marker (see the module
    docstring): one native error event, what was delivered is billed."""

    usage: Usage

    @property
    def status(self) -> int:
        return 502

    @property
    def message(self) -> str:
        return ENDED_EARLY_MESSAGE

    @property
    def billed(self) -> Usage | None:
        return self.usage

    @property
    def verdict(self) -> str:
        return ACCEPTED


@dataclass(frozen=True)
class Cut:
    """The stopping process ended a started stream at the end of its grace period
    (operations contract §6): one native error event, what was delivered is billed."""

    usage: Usage

    @property
    def status(self) -> int:
        return 503

    @property
    def message(self) -> str:
        return CUT_MESSAGE

    @property
    def billed(self) -> Usage | None:
        return self.usage

    @property
    def verdict(self) -> str:
        return ACCEPTED


Outcome = (Served | Refused | UpstreamFailed | ClientLeft | StreamFailed | StreamEndedEarly
           | Cut)


def attempt_failed(outcome: Outcome) -> bool:
    """Does the attempt's metric count it as failed (``observability.outcomes``)? Every exit
    that produced no answer, and every answer that broke off with an error status."""
    return outcome.verdict != ACCEPTED or outcome.status >= 500


def refusal_of(outcome: Outcome) -> GatewayError | None:
    """The error the client still has to be answered with (None: it was answered already,
    or it left)."""
    if isinstance(outcome, Refused | UpstreamFailed):
        return outcome.error
    return None


def internal_error() -> Refused:
    """An unexpected failure in our own code: 500, nothing billed."""
    return Refused(errors.internal())


def logged_usage(outcome: Outcome) -> Usage | None:
    """The usage the row shows: what was measured, billed or not."""
    if isinstance(outcome, Refused):
        return outcome.logged
    if isinstance(outcome, UpstreamFailed):
        return None
    return outcome.usage


def settlement_record(log: RequestLog, outcome: Outcome, now: float,
                      created_at: datetime) -> SettlementRecord:
    """The one place an exit becomes a usage-log row and a charge."""
    return log.record(now, created_at, status=outcome.status, error_message=outcome.message,
                      usage=logged_usage(outcome), billed=outcome.billed is not None)
