"""``/metrics`` on its own listener (operations contract §0, §2), scraped over real HTTP.

The app runs with metrics on; its main listener is the ``MeteredSite`` the service uses and the
metrics listener is the service's ``metrics_site``; /v1 calls go through a loopback upstream.
Every scrape is parsed by ``prometheus_client``'s own parser.
"""

from __future__ import annotations

from typing import Any

import treq
from prometheus_client.parser import text_string_to_metric_families
from twisted.internet import reactor
from twisted.internet.defer import ensureDeferred
from twisted.internet.task import deferLater
from twisted.protocols.policies import WrappingFactory

from tap.drain import InFlight
from tap.metrics_listener import MeteredSite, metrics_site
from tests.gateway.gateway_case import GatewayTestCase, expected_cost_nanos

BUCKETS = ["0.005", "0.01", "0.025", "0.05", "0.1", "0.25", "0.5", "1.0", "2.5", "5.0", "10.0",
           "30.0", "60.0", "120.0", "300.0", "+Inf"]

#: §2: exposition name -> type (the parser names a counter family without ``_total``)
FAMILIES = {
    "lockgate_build_info": "gauge",
    "lockgate_http_requests": "counter",
    "lockgate_http_request_duration_seconds": "histogram",
    "lockgate_upstream_attempts": "counter",
    "lockgate_upstream_failovers": "counter",
    "lockgate_upstream_time_to_first_byte_seconds": "histogram",
    "lockgate_active_streams": "gauge",
    "lockgate_reservations_open": "gauge",
    "lockgate_settlement_queue_depth": "gauge",
    "lockgate_settlement_lag_seconds": "histogram",
    "lockgate_settlements": "counter",
    "lockgate_billed_units": "counter",
    "lockgate_billed_tokens": "counter",
    "lockgate_task_poller_backlog": "gauge",
    "lockgate_links_online": "gauge",
    "lockgate_shared_state_up": "gauge",
    "lockgate_draining": "gauge",
}
LABEL_VALUES = {
    "family": {"chat", "completions", "responses", "messages", "modelaction", "audio",
               "moderations", "images", "videos", "artjob", "clipgen2", "tasks", "uploads",
               "account", "models", "console", "auth", "public", "probe", "other"},
    "outcome": {"ok", "connect_error", "timeout", "status_4xx", "status_429", "status_5xx",
                "cut", "charged", "free", "refunded", "failed"},
    "direction": {"input", "output", "cached"},
    "kind": {"sandbox_host", "connector_device"},
}


class Scrape:
    def __init__(self, text: str) -> None:
        self.text = text
        self.families = {f.name: f for f in text_string_to_metric_families(text)}

    def value(self, name: str, **labels: str) -> float:
        """The one sample called ``name`` with exactly ``labels`` (0 when there is none)."""
        family = name.removesuffix("_total").removesuffix("_bucket").removesuffix(
            "_count").removesuffix("_sum")
        found = [s.value for s in self.families[family].samples
                 if s.name == name and s.labels == labels]
        assert len(found) <= 1, found
        return found[0] if found else 0.0

    def samples(self, family: str) -> list[Any]:
        return list(self.families[family].samples)


class MetricsTests(GatewayTestCase):
    def open_app(self, **overrides: Any) -> Any:
        return super().open_app(metrics=True, **overrides)

    def setUp(self) -> None:
        super().setUp()
        self.in_flight = InFlight()
        main = MeteredSite(self.app.root, self.in_flight, self.app.metrics)
        self.base = self._listen(main)
        self.metrics_base = self._listen(metrics_site(self.app.metrics, self.app.root))
        self.app.metrics.sources.draining = lambda: self.in_flight.draining

    def _listen(self, site: Any) -> str:
        factory = WrappingFactory(site)
        port = reactor.listenTCP(0, factory, interface="127.0.0.1")

        def close() -> Any:
            for protocol in list(factory.protocols):
                protocol.transport.abortConnection()
            return deferLater(reactor, 0.01, lambda: None)

        self.addCleanup(close)
        self.addCleanup(port.stopListening)
        return f"http://127.0.0.1:{port.getHost().port}"

    async def scrape(self) -> Scrape:
        response = await treq.get(self.metrics_base + "/metrics", pool=self.pool)
        assert response.code == 200
        assert response.headers.getRawHeaders("content-type") == [
            "text/plain; version=0.0.4; charset=utf-8"]
        return Scrape((await treq.content(response)).decode())

    async def chat(self, model: str = "gpt-fake", *, stream: bool = False) -> Any:
        body: dict[str, Any] = {"model": model, "stream": stream,
                                "messages": [{"role": "user", "content": "hello there"}]}
        if stream:
            body["stream_options"] = {"include_usage": True}
        return await self.call("POST", "/v1/chat/completions", body, token=self.api_key)

    def assert_bounded(self, scrape: Scrape) -> None:
        for family in scrape.families.values():
            if not family.name.startswith("lockgate_"):
                continue
            for sample in family.samples:
                for label, value in sample.labels.items():
                    if label in LABEL_VALUES:
                        assert value in LABEL_VALUES[label], (sample.name, label, value)
                    elif label == "channel":
                        assert value.isdigit(), sample
                    elif label == "code":
                        assert len(value) == 3 and value.isdigit(), sample

    async def test_every_family_is_exposed_from_the_first_scrape(self) -> None:
        scrape = await self.scrape()
        for name, kind in FAMILIES.items():
            family = scrape.families.get(name)
            assert family is not None, name
            assert family.type == kind, (name, family.type)
            assert family.documentation, name
            shown = name + "_total" if kind == "counter" else name
            assert f"# HELP {shown} " in scrape.text and f"# TYPE {shown} {kind}" in scrape.text
        for name in ("lockgate_http_request_duration_seconds", "lockgate_settlement_lag_seconds"):
            buckets = [s.labels["le"] for s in scrape.samples(name)
                       if s.name == name + "_bucket" and s.labels.get("family", "chat") == "chat"]
            assert buckets == BUCKETS, (name, buckets)
        assert scrape.value("lockgate_build_info", version="dev",
                            python=next(iter(scrape.samples("lockgate_build_info"))
                                        ).labels["python"]) == 1
        assert scrape.value("lockgate_draining") == 0
        assert scrape.value("lockgate_reservations_open") == 0
        assert scrape.value("lockgate_links_online", kind="sandbox_host") == 0
        # no Redis here: the family is there, its sample is not
        assert scrape.samples("lockgate_shared_state_up") == []
        for name in ("lockgate_http_requests", "lockgate_upstream_attempts"):
            assert scrape.samples(name) == [], name  # counters start at 0, with no series
        self.assert_bounded(scrape)

    async def test_counters_move_after_real_calls(self) -> None:
        await self.provision()
        plain = await self.chat()
        assert plain.status == 200, plain
        streamed = await self.chat(stream=True)
        assert streamed.status == 200 and b"[DONE]" in streamed.body, streamed
        rows = await self.usage_rows()  # flushes the settler
        assert len(rows) == 2
        scrape = await self.scrape()
        channel = str(self.channel_id)
        assert scrape.value("lockgate_http_requests_total", family="chat", model="gpt-fake",
                            code="200") == 2
        assert scrape.value("lockgate_http_request_duration_seconds_count", family="chat") == 2
        assert scrape.value("lockgate_http_request_duration_seconds_bucket", family="chat",
                            le="+Inf") == 2
        assert scrape.value("lockgate_upstream_attempts_total", channel=channel,
                            outcome="ok") == 2
        assert scrape.value("lockgate_upstream_time_to_first_byte_seconds_count",
                            channel=channel) == 2
        assert scrape.value("lockgate_settlements_total", outcome="charged") == 2
        assert scrape.value("lockgate_settlement_lag_seconds_count") == 2
        cost = sum(row["cost_nanos"] for row in rows)
        assert cost == 2 * expected_cost_nanos(rows[0]["input_tokens"],
                                               rows[0]["output_tokens"])
        assert abs(scrape.value("lockgate_billed_units_total", family="chat")
                   - cost / 1e9) < 1e-9
        assert scrape.value("lockgate_billed_tokens_total", direction="input") == sum(
            row["input_tokens"] for row in rows)
        assert scrape.value("lockgate_billed_tokens_total", direction="output") == sum(
            row["output_tokens"] for row in rows)
        assert scrape.value("lockgate_active_streams", family="chat") == 0
        assert scrape.value("lockgate_reservations_open") == 0
        assert scrape.value("lockgate_settlement_queue_depth") == 0
        # the console calls of provision() were counted too, without a model
        assert scrape.value("lockgate_http_requests_total", family="public", model="",
                            code="200") == 1  # POST /api/setup
        self.assert_bounded(scrape)

    async def test_model_label_is_bounded_by_the_catalogue(self) -> None:
        await self.provision()
        unknown = await self.chat("no-such-model-" + "x" * 40)
        assert unknown.status >= 400
        listed = await self.call("GET", "/v1/models", token=self.api_key)
        assert listed.status == 200
        scrape = await self.scrape()
        assert scrape.value("lockgate_http_requests_total", family="chat", model="other",
                            code=str(unknown.status)) == 1
        assert scrape.value("lockgate_http_requests_total", family="models", model="",
                            code="200") == 1
        assert "no-such-model" not in scrape.text
        assert scrape.value("lockgate_settlements_total", outcome="charged") == 0
        self.assert_bounded(scrape)

    async def test_failover_and_attempt_outcomes(self) -> None:
        await self.provision(upstream_model="gpt-fake+fail-503")
        backup = await self.catalog.channel(self.uc_id, "backup", base_url=self.fake.base_url,
                                            priority=0)
        await self.catalog.config(backup, self.model_id)
        await self.catalog.announce()
        answer = await self.chat()
        assert answer.status == 200, answer
        await self.usage_rows()
        scrape = await self.scrape()
        primary = str(self.channel_id)
        assert scrape.value("lockgate_upstream_attempts_total", channel=primary,
                            outcome="status_5xx") == 1
        assert scrape.value("lockgate_upstream_attempts_total", channel=str(backup),
                            outcome="ok") == 1
        assert scrape.value("lockgate_upstream_failovers_total", channel=primary) == 1
        assert scrape.value("lockgate_upstream_failovers_total", channel=str(backup)) == 0
        assert scrape.value("lockgate_settlements_total", outcome="charged") == 1

    async def test_upstream_refusal_is_counted_and_refunded(self) -> None:
        await self.provision(upstream_model="gpt-fake+fail-429")
        answer = await self.chat()
        assert answer.status == 429, answer
        await self.usage_rows()
        scrape = await self.scrape()
        assert scrape.value("lockgate_upstream_attempts_total", channel=str(self.channel_id),
                            outcome="status_429") == 1
        assert scrape.value("lockgate_http_requests_total", family="chat", model="gpt-fake",
                            code="429") == 1
        assert scrape.value("lockgate_settlements_total", outcome="refunded") == 1
        assert scrape.value("lockgate_billed_tokens_total", direction="input") == 0

    async def test_draining_gauge_reads_the_drain_flag(self) -> None:
        self.in_flight.draining = True
        assert (await self.scrape()).value("lockgate_draining") == 1

    async def test_main_listener_has_no_metrics(self) -> None:
        response = await self.call("GET", "/metrics")
        assert response.status == 404
        assert response.header("content-type") == "application/json"
        assert response.json()["type"] == "not_found"

    async def test_probes_answer_on_the_metrics_listener(self) -> None:
        for path, body in (("/healthz", {"status": "ok"}), ("/readyz", {"status": "ready"})):
            response = await treq.get(self.metrics_base + path, pool=self.pool)
            assert response.code == 200, path
            assert response.headers.getRawHeaders("content-type") == ["application/json"]
            assert await treq.json_content(response) == body
        other = await treq.get(self.metrics_base + "/api/status", pool=self.pool)
        assert other.code == 404
        await treq.content(other)

    async def test_gauges_show_a_stream_in_flight(self) -> None:
        await self.provision(upstream_model="gpt-fake+chunks-6+pace-0.2")
        pending = ensureDeferred(self.chat(stream=True))
        during = None
        for _ in range(100):
            scrape = await self.scrape()
            if scrape.value("lockgate_active_streams", family="chat") == 1:
                during = scrape
                break
            await deferLater(reactor, 0.02, lambda: None)
        assert during is not None, "the stream never showed as open"
        assert during.value("lockgate_reservations_open") == 1
        answer = await pending
        assert answer.status == 200 and b"[DONE]" in answer.body
        await self.usage_rows()
        after = await self.scrape()
        assert after.value("lockgate_active_streams", family="chat") == 0
        assert after.value("lockgate_reservations_open") == 0
        assert after.value("lockgate_settlement_queue_depth") == 0
