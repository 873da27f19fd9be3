"""A meta model's sub-calls are observed like any upstream attempt (issue 17): each one is
counted in ``lockgate_upstream_attempts`` (and its time to first byte) on ``/metrics``, and is a
``CLIENT`` span of the client call whose ``traceparent`` reaches the upstream.  The cached
reservation of a meta model follows every catalog change (price, disabled model, edited
program) through the real catalog reload.

The gateway runs with metrics on and its ``/metrics`` listener; traces go to a loopback OTLP
collector; the upstream is the fake OpenAI-compatible one.
"""

from __future__ import annotations

from typing import Any

import openai
import treq
from opentelemetry.proto.trace.v1.trace_pb2 import Span as SpanProto
from twisted.internet import reactor
from twisted.web.server import Site

from gateway.observability.tracing import Tracing
from gateway.store import schema
from tap.metrics_listener import metrics_site
from tests.gateway.test_meta_models_sdk import BY_LENGTH, MetaModelCase
from tests.gateway.test_tracing import Collector
from tests.tap.test_metrics import Scrape

SYNTHESIZE = 'parallel { call "gpt-big"; call "gpt-fake" } synthesize "gpt-big"'


class SubCallMetricsTests(MetaModelCase):
    def open_app(self, **overrides: Any) -> Any:
        return super().open_app(metrics=True, **overrides)

    def setUp(self) -> None:
        super().setUp()
        port = reactor.listenTCP(0, metrics_site(self.app.metrics, self.app.root),
                                 interface="127.0.0.1")
        self.addCleanup(port.stopListening)
        self.metrics_base = f"http://127.0.0.1:{port.getHost().port}"

    async def scrape(self) -> Scrape:
        response = await treq.get(self.metrics_base + "/metrics", pool=self.pool)
        assert response.code == 200
        return Scrape((await treq.content(response)).decode())

    async def test_every_sub_call_is_an_attempt_on_metrics(self) -> None:
        await self.setup_meta(SYNTHESIZE)
        channel = str(self.channel_id)
        before = await self.scrape()
        assert before.value("lockgate_upstream_attempts_total", channel=channel,
                            outcome="ok") == 0
        reply = await self.chat("hi")
        assert reply.status_code == 200
        assert len(self.fake.requests) == 3
        after = await self.scrape()
        # two candidates and the synthesizer, each one attempt on the case's channel
        assert after.value("lockgate_upstream_attempts_total", channel=channel,
                           outcome="ok") == 3
        assert after.value("lockgate_upstream_time_to_first_byte_seconds_count",
                           channel=channel) == 3

    async def test_a_failing_sub_call_is_counted_by_its_outcome(self) -> None:
        await self.setup_meta(name="plain")
        bad = await self.catalog.model("gpt-bad")
        await self.catalog.config(self.channel_id, bad, upstream="gpt-bad+fail-400")
        await self.catalog.announce()
        await self.create_meta('parallel { call "gpt-fake"; call "gpt-bad" } '
                               'synthesize "gpt-fake"')
        reply = await self.chat("hi")
        assert reply.status_code == 200  # one good candidate is enough for the synthesizer
        scrape = await self.scrape()
        channel = str(self.channel_id)
        assert scrape.value("lockgate_upstream_attempts_total", channel=channel,
                            outcome="ok") == 2
        assert scrape.value("lockgate_upstream_attempts_total", channel=channel,
                            outcome="status_4xx") == 1


    async def test_a_sub_call_failing_over_counts_the_failover(self) -> None:
        await self.setup_meta(name="plain")
        flaky = await self.catalog.model("gpt-flaky")
        await self.catalog.config(self.channel_id, flaky, upstream="gpt-flaky+fail-503")
        backup = await self.catalog.channel(self.uc_id, "backup", base_url=self.fake.base_url,
                                            priority=0)
        await self.catalog.config(backup, flaky)
        await self.catalog.announce()
        await self.create_meta('parallel { call "gpt-flaky"; call "gpt-fake" } '
                               'synthesize "gpt-fake"')
        reply = await self.chat("hi")
        assert reply.status_code == 200
        scrape = await self.scrape()
        primary = str(self.channel_id)
        assert scrape.value("lockgate_upstream_attempts_total", channel=primary,
                            outcome="status_5xx") == 1
        assert scrape.value("lockgate_upstream_failovers_total", channel=primary) == 1
        assert scrape.value("lockgate_upstream_attempts_total", channel=str(backup),
                            outcome="ok") == 1
        assert scrape.value("lockgate_upstream_attempts_total", channel=primary,
                            outcome="ok") == 2


class SubCallTraceTests(MetaModelCase):
    def open_app(self, **overrides: Any) -> Any:
        self.collector = Collector()
        port = reactor.listenTCP(0, Site(self.collector), interface="127.0.0.1")
        self.addCleanup(port.stopListening)
        self.tracing = Tracing(f"http://127.0.0.1:{port.getHost().port}/v1/traces",
                               schedule_delay_millis=50)
        return super().open_app(tracing=self.tracing, **overrides)

    async def test_every_sub_call_is_a_span_of_the_client_call(self) -> None:
        await self.setup_meta(SYNTHESIZE)
        reply = await self.chat("hi")
        assert reply.status_code == 200
        assert await self.tracing.flush(reactor)
        spans = list(self.collector.spans)
        (server,) = [s for s in spans if s.kind == SpanProto.SPAN_KIND_SERVER]
        attempts = sorted((s for s in spans if s.kind == SpanProto.SPAN_KIND_CLIENT),
                          key=lambda s: s.start_time_unix_nano)
        assert len(attempts) == 3
        for attempt in attempts:
            assert attempt.parent_span_id == server.span_id
            assert attempt.trace_id == server.trace_id
            attributes = {a.key: a.value for a in attempt.attributes}
            assert attributes["lockgate.outcome"].string_value == "ok"
        # each upstream request carried its own attempt's span (the two candidates start
        # together, so their order is not fixed)
        sent = [r.headers.get("traceparent", "").split("-")[2] for r in self.fake.requests]
        assert sorted(sent[:2]) == sorted(a.span_id.hex() for a in attempts[:2])
        assert sent[2] == attempts[2].span_id.hex()


class CachedReservationTests(MetaModelCase):
    """The reservation rule is cached per catalog snapshot: every change that reloads the
    catalog must be seen by the next request.  1000 output tokens cost 2 units on gpt-fake
    and 200 on gpt-big (200,000 per 1M output): with a balance of 10 a call that can reach
    gpt-big is refused (402), one that cannot is served."""

    async def refused(self) -> bool:
        try:
            await self.chat("hi", max_tokens=1000)
        except openai.APIStatusError as exc:
            assert exc.status_code == 402, exc
            return True
        return False

    async def test_a_price_change_is_reserved_at_once(self) -> None:
        await self.setup_meta(balance="10", big_output="200000")
        assert await self.refused()
        await self.ctx.db.transaction(lambda conn: conn.execute(
            schema.models.update().where(schema.models.c.model_name == "gpt-big")
            .values(output_price_nanos=1_000_000_000)))
        await self.catalog.announce()
        assert not await self.refused()
        assert self.upstream_models() == ["gpt-fake"]

    async def test_a_disabled_model_is_no_longer_reserved_for(self) -> None:
        await self.setup_meta(balance="10", big_output="200000")
        assert await self.refused()
        await self.ctx.db.transaction(lambda conn: conn.execute(
            schema.models.update().where(schema.models.c.model_name == "gpt-big")
            .values(enabled=False)))
        await self.catalog.announce()
        assert not await self.refused()

    async def test_an_edited_program_is_reserved_for_at_once(self) -> None:
        meta = await self.setup_meta(balance="10", big_output="200000")
        assert await self.refused()
        updated = await self.call("PUT", f"/api/meta-models/{meta['id']}",
                                  {"name": "auto", "dsl": 'call "gpt-fake"'},
                                  token=self.admin_token)
        assert updated.status == 200, updated
        assert not await self.refused()
        updated = await self.call("PUT", f"/api/meta-models/{meta['id']}",
                                  {"name": "auto", "dsl": BY_LENGTH},
                                  token=self.admin_token)
        assert updated.status == 200, updated
        assert await self.refused()
