"""The call outcome: every exit of a /v1 call, what its row says, whether it bills and whether
the attempt loop may fail over (``gateway.v1.outcome``; pure, no I/O)."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime
from decimal import Decimal

from twisted.trial import unittest

from gateway import errors
from gateway.billing.cost import PriceSet, compute_cost
from gateway.billing.pricing import EffectivePrices
from gateway.billing.usage import Usage
from gateway.catalog.snapshot import Candidate, Channel, Model, ModelConfig, UserChannel
from gateway.errors import GatewayError
from gateway.metering import Priced, RequestLog
from gateway.v1.outcome import (
    ACCEPTED,
    REFUSED,
    RETRYABLE,
    ClientLeft,
    Cut,
    Outcome,
    Refused,
    Served,
    StreamEndedEarly,
    StreamFailed,
    UpstreamFailed,
    attempt_failed,
    internal_error,
    refusal_of,
    settlement_record,
)

USAGE = Usage(input=10, output=4)
PRICES = PriceSet(input=Decimal(1000), output=Decimal(2000))
NOW = datetime(2026, 11, 25, 12, 0, tzinfo=UTC)


def priced() -> Priced:
    candidate = Candidate(
        config=ModelConfig(id=7, channel_id=3, model_id=5, upstream_model_name="", enabled=True,
                           price_overrides={}),
        model=Model(id=5, model_name="gpt-x", display_name="", provider="", provider_icon_url="",
                    quota_type=0, enabled=True, prices={}, tiers={}, video_billing_config=None),
        channel=Channel(id=3, user_channel_id=2, name="up", type="compat",
                        base_url="http://up", api_key="k", priority=0, weight=1, enabled=True),
        user_channel=UserChannel(id=2, name="std", description="", multiplier=Decimal(1),
                                 routing_algorithm="priority", enabled=True,
                                 rate_limit_enabled=False, rate_limit_requests_per_minute=0,
                                 rate_limit_burst=0))
    effective = EffectivePrices(base={}, group_multiplier=Decimal(1),
                                user_channel_multiplier=Decimal(1), prices={})
    return Priced(candidate, effective, PRICES)


def request_log() -> RequestLog:
    return RequestLog(request_id="r1", user_id=9, api_key_id=4, endpoint="/v1/chat/completions",
                      started=100.0, ip="127.0.0.1", user_agent="ua", model_name="gpt-x",
                      is_stream=True, priced=priced(), first_byte_at=100.5)


#: every exit, with (row status, row message, billed?, verdict)
EXITS: list[tuple[Outcome, int, str, bool, str]] = [
    (Served(USAGE), 0, "", True, ACCEPTED),
    (Served(None), 0, "", False, ACCEPTED),
    (Refused(errors.from_upstream(400, None)), 400, "", False, REFUSED),
    (Refused(errors.from_upstream(503, None), retryable=True), 502, "", False, RETRYABLE),
    (UpstreamFailed(errors.upstream_failed()), 502, "", False, RETRYABLE),
    (ClientLeft(), 499, "client disconnected", False, REFUSED),
    (ClientLeft(USAGE, delivered=False), 499, "client disconnected", False, REFUSED),
    (ClientLeft(USAGE, delivered=True), 499, "client disconnected", True, ACCEPTED),
    (StreamFailed(USAGE, "UpstreamTimeout"), 502, "stream failed: UpstreamTimeout", True,
     ACCEPTED),
    (StreamEndedEarly(USAGE), 502, "upstream stream ended before completion", True, ACCEPTED),
    (Cut(USAGE), 503, "stream cut: the server is shutting down", True, ACCEPTED),
]


class OutcomeMappingTests(unittest.TestCase):
    def test_each_exit_maps_to_its_row_charge_and_verdict(self) -> None:
        expected_cost = compute_cost(USAGE, PRICES).cost
        for outcome, status, message, billed, verdict in EXITS:
            record = settlement_record(request_log(), outcome, 101.0, NOW)
            assert record.status == status, outcome
            if message:
                assert record.error_message == message, outcome
            else:
                assert record.error_message == getattr(outcome, "message", ""), outcome
            assert (record.cost is not None) is billed, outcome
            assert record.delivered is billed, outcome
            if billed:
                assert record.cost is not None and record.cost.cost == expected_cost, outcome
                assert record.usage == USAGE, outcome
            assert outcome.verdict == verdict, outcome

    def test_the_row_keeps_who_what_and_when_from_the_log(self) -> None:
        record = settlement_record(request_log(), StreamEndedEarly(USAGE), 101.25, NOW)
        assert (record.request_id, record.user_id, record.api_key_id) == ("r1", 9, 4)
        assert (record.channel_id, record.user_channel_id, record.model_config_id) == (3, 2, 7)
        assert record.response_time_ms == 1250 and record.first_response_time_ms == 500
        assert record.is_stream and record.created_at == NOW

    def test_a_refusal_logs_the_planned_usage_without_charging_it(self) -> None:
        refused = Refused(errors.from_upstream(400, None), logged=USAGE)
        record = settlement_record(request_log(), refused, 101.0, NOW)
        assert record.usage == USAGE and record.cost is None and not record.delivered

    def test_a_free_call_is_logged_at_no_cost(self) -> None:
        record = settlement_record(request_log(), Served(None), 101.0, NOW)
        assert record.cost is None and record.usage == Usage() and record.status == 0

    def test_without_a_chosen_candidate_nothing_is_charged(self) -> None:
        log = dataclasses.replace(request_log(), priced=None)
        record = settlement_record(log, Served(USAGE), 101.0, NOW)
        assert record.cost is None and record.channel_id is None

    def test_only_errors_nobody_answered_yet_are_answered(self) -> None:
        error = GatewayError(400, "bad", type="invalid_request")
        assert refusal_of(Refused(error)) is error
        assert refusal_of(UpstreamFailed(error)) is error
        for answered in (Served(USAGE), ClientLeft(), StreamFailed(USAGE, "X"),
                         StreamEndedEarly(USAGE), Cut(USAGE)):
            assert refusal_of(answered) is None, answered

    def test_attempt_metrics_count_unanswered_and_broken_exits_as_failed(self) -> None:
        assert not attempt_failed(Served(USAGE))
        assert not attempt_failed(ClientLeft(USAGE, delivered=True))
        for failed in (Refused(GatewayError(400, "x", type="invalid_request")), UpstreamFailed(GatewayError(502, "x", type="upstream_error")),
                       ClientLeft(), StreamFailed(USAGE, "X"), StreamEndedEarly(USAGE),
                       Cut(USAGE)):
            assert attempt_failed(failed), failed

    def test_an_internal_error_is_a_500_that_bills_nothing(self) -> None:
        outcome = internal_error()
        assert outcome.status == 500 and outcome.billed is None and outcome.verdict == REFUSED

    def test_outcomes_are_immutable(self) -> None:
        outcome = StreamEndedEarly(USAGE)
        with self.assertRaises(dataclasses.FrozenInstanceError):
            outcome.usage = Usage()  # type: ignore[misc]
