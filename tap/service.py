"""``makeService`` for ``twistd lockgate``: the app, then the listeners; drain on stop."""

from __future__ import annotations

from typing import Any

from twisted.application import strports
from twisted.application.service import IService, MultiService
from twisted.internet.defer import Deferred, DeferredList
from twisted.logger import Logger

from console.routes.updates import BUILD_VERSION
from gateway.observability.tracing import Tracing
from tap.access_log import redacting_log_formatter
from tap.app import Lockgate
from tap.drain import CountingSite, InFlight
from tap.interpreter_tuning import tune_interpreter
from tap.metrics_listener import MeteredSite, metrics_site
from tap.options import Options
from tap.secrets import load_or_create
from tap.state_factory import open_state

log = Logger()


class LockgateService(MultiService):
    """Opens the app on start (DB -> migrations -> state -> caches), then listens."""

    def __init__(self, options: dict[str, Any], reactor: Any) -> None:
        super().__init__()
        self.options = options
        self.reactor = reactor
        self.app: Lockgate | None = None
        self.in_flight = InFlight()

    def startService(self) -> None:
        secrets = load_or_create(self.options["secret-file"])
        state = open_state(self.reactor, self.options.get("redis"))
        self.app = Lockgate.open(
            self.reactor, database=self.options["database"], secrets=secrets, state=state,
            trusted_proxies=self.options.get("trusted-proxies") or "",
            db_threads=self.options.get("db-threads"),
            run_migrations=not self.options.get("no-migrate"),
            metrics=bool(self.options.get("metrics-listen")),
            tracing=(Tracing(self.options["otlp-endpoint"], version=BUILD_VERSION)
                     if self.options.get("otlp-endpoint") else None),
        )
        d = state.start()
        d.addCallback(lambda _: self._listen())
        d.addErrback(self._failed)

    def _listen(self) -> None:
        assert self.app is not None
        tune_interpreter()
        metrics = self.app.metrics
        site = (CountingSite(self.app.root, self.in_flight, logFormatter=redacting_log_formatter,
                             access_log=self.options["access-log"]) if metrics is None else
                MeteredSite(self.app.root, self.in_flight, metrics,
                            logFormatter=redacting_log_formatter,
                            access_log=self.options["access-log"]))
        site.displayTracebacks = False
        for endpoint in self.options["listen"]:
            strports.service(endpoint, site).setServiceParent(self)
        endpoints = list(self.options["listen"])
        if metrics is not None:
            in_flight = self.in_flight
            metrics.sources.draining = lambda: in_flight.draining
            strports.service(self.options["metrics-listen"],
                             metrics_site(metrics, self.app.root)).setServiceParent(self)
            endpoints.append(f"{self.options['metrics-listen']} (metrics)")
        MultiService.startService(self)
        log.info("Lockgate listening on {endpoints}", endpoints=", ".join(endpoints))

    def _failed(self, failure: Any) -> None:
        log.failure("Lockgate failed to start", failure)
        self.reactor.stop()

    def stopService(self) -> Deferred[None]:
        listeners = [service.stopService() for service in list(self)
                     if IService.providedBy(service) and service.running]
        d: Deferred[Any] = DeferredList(listeners)
        grace = self.options["shutdown-grace"]
        d.addCallback(lambda _: self.in_flight.drained(self.reactor, grace))
        if self.app is not None:
            app = self.app
            d.addCallback(lambda _: app.close())
        d.addCallback(lambda _: setattr(self, "running", 0))
        return d


def makeService(options: Options) -> MultiService:
    from twisted.internet import reactor

    return LockgateService(dict(options), reactor)
