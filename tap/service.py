"""``makeService`` for ``twistd lockgate``: the app, then the listeners; drain on stop."""

from __future__ import annotations

import os
from typing import Any

from twisted.application import strports
from twisted.application.service import IService, MultiService
from twisted.internet.defer import Deferred, DeferredList, ensureDeferred
from twisted.logger import Logger

from tap.access_log import redacting_log_formatter
from tap.app import Lockgate
from tap.drain import CountingSite, InFlight
from tap.interpreter_tuning import tune_interpreter
from tap.json_log import install
from tap.options import Options
from tap.secrets import load_or_create
from tap.startup_report import report_opened, report_setup
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
        #: twistd's own options (``--logfile``, ``-n``), when run by twistd
        self.twistd_options: Any = None

    def startService(self) -> None:
        secret_created = not os.path.exists(self.options["secret-file"])
        secrets = load_or_create(self.options["secret-file"])
        state = open_state(self.reactor, self.options.get("redis"))
        self.app = Lockgate.open(
            self.reactor, database=self.options["database"], secrets=secrets, state=state,
            trusted_proxies=self.options.get("trusted-proxies") or "",
            db_threads=self.options.get("db-threads"),
            run_migrations=not self.options.get("no-migrate"),
            node_name=self.options.get("node-name") or "",
        )
        report_opened(self.options, secret_created)
        d = state.start()
        d.addCallback(lambda _: self._listen())
        d.addErrback(self._failed)

    def setServiceParent(self, parent: Any) -> Any:
        # twistd attaches us to its application before it starts logging: the moment to
        # choose the log observer (``tap.json_log``)
        install(parent, self.options.get("log-format", "human"), self.twistd_options)
        return super().setServiceParent(parent)

    def _listen(self) -> None:
        assert self.app is not None
        tune_interpreter()
        site = CountingSite(self.app.root, self.in_flight, logFormatter=redacting_log_formatter,
                            access_log=self.options["access-log"])
        site.displayTracebacks = False
        site.noisy = False  # no "Starting factory" lines; report_setup says what listens
        for endpoint in self.options["listen"]:
            strports.service(endpoint, site).setServiceParent(self)
        MultiService.startService(self)
        ensureDeferred(report_setup(self.app.db, self.options["listen"])).addErrback(
            lambda failure: log.failure("start-up report failed", failure))

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

    service = LockgateService(dict(options), reactor)
    service.twistd_options = getattr(options, "parent", None)
    return service
