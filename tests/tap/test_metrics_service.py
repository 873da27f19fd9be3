"""``--metrics-listen`` end to end: the option, and the service's two listeners.

The service is the real ``LockgateService`` (as ``twistd lockgate`` builds it) on a fresh SQLite
file, listening on loopback ports; the requests are real HTTP.
"""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
from typing import Any

import treq
from prometheus_client.parser import text_string_to_metric_families
from twisted.internet import reactor
from twisted.internet.task import deferLater
from twisted.python import usage
from twisted.trial.unittest import TestCase
from twisted.web.client import HTTPConnectionPool

from tap.options import Options
from tap.service import LockgateService


def parse(*args: str) -> dict[str, Any]:
    options = Options()
    options.parseOptions(list(args))
    return dict(options)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class MetricsOptionTests(TestCase):
    def setUp(self) -> None:
        self.environ: dict[str, str] = {}
        self.patch(os, "environ", self.environ)

    def test_off_by_default(self) -> None:
        config = parse()
        assert config["metrics-listen"] is None
        assert config["otlp-endpoint"] is None

    def test_command_line_environment_and_file(self) -> None:
        assert parse("--metrics-listen", "tcp:9100")["metrics-listen"] == "tcp:9100"
        self.environ["LOCKGATE_METRICS_LISTEN"] = "tcp:9101:interface=127.0.0.1"
        assert parse()["metrics-listen"] == "tcp:9101:interface=127.0.0.1"
        del self.environ["LOCKGATE_METRICS_LISTEN"]
        directory = tempfile.mkdtemp(prefix="lockgate-options-")
        self.addCleanup(shutil.rmtree, directory, True)
        path = os.path.join(directory, "lockgate.toml")
        with open(path, "w") as handle:
            handle.write('metrics-listen = "tcp:9102"\n'
                         'otlp-endpoint = "http://127.0.0.1:4318/v1/traces"\n')
        config = parse("--config", path)
        assert config["metrics-listen"] == "tcp:9102"
        assert config["otlp-endpoint"] == "http://127.0.0.1:4318/v1/traces"

    def test_bad_values_are_refused(self) -> None:
        for args in (("--metrics-listen", "  "), ("--otlp-endpoint", "collector:4318")):
            with self.assertRaises(usage.UsageError):
                parse(*args)


class MetricsServiceTests(TestCase):
    async def test_service_serves_metrics_on_its_own_listener(self) -> None:
        directory = tempfile.mkdtemp(prefix="lockgate-service-")
        self.addCleanup(shutil.rmtree, directory, True)
        main, scrape = free_port(), free_port()
        options = parse(
            "--listen", f"tcp:{main}:interface=127.0.0.1",
            "--metrics-listen", f"tcp:{scrape}:interface=127.0.0.1",
            "--database", f"sqlite:///{os.path.join(directory, 'db.sqlite3')}",
            "--secret-file", os.path.join(directory, "secret"), "--access-log", "off")
        service = LockgateService(options, reactor)
        service.startService()
        self.addCleanup(service.stopService)
        pool = HTTPConnectionPool(reactor, persistent=False)
        self.addCleanup(pool.closeCachedConnections)
        for _ in range(250):  # the listeners open once the app is up
            if service.running:
                break
            await deferLater(reactor, 0.02, lambda: None)
        assert service.running

        health = await treq.get(f"http://127.0.0.1:{main}/healthz", pool=pool)
        assert health.code == 200
        await treq.content(health)
        on_main = await treq.get(f"http://127.0.0.1:{main}/metrics", pool=pool)
        assert on_main.code == 404
        assert (await treq.json_content(on_main))["type"] == "not_found"

        response = await treq.get(f"http://127.0.0.1:{scrape}/metrics", pool=pool)
        assert response.code == 200
        families = {f.name: f for f in text_string_to_metric_families(
            (await treq.content(response)).decode())}
        assert [s.value for s in families["lockgate_draining"].samples] == [0]
        probes = {(s.labels["code"], s.labels["model"]): s.value
                  for s in families["lockgate_http_requests"].samples
                  if s.labels["family"] == "probe"}
        assert probes == {("200", ""): 1, ("404", ""): 1}  # /healthz and /metrics on main
        ready = await treq.get(f"http://127.0.0.1:{scrape}/readyz", pool=pool)
        assert ready.code == 200
        assert await treq.json_content(ready) == {"status": "ready"}
