"""``makeService`` for ``twistd lockgate``: the app, then the listeners, then the drain.

The process's service is an ``OrderedServices`` (``tap.ordered_services``) whose children are,
in the order they start: the app's own tree (``Lockgate.services``), the listeners, and the
``Drain``.  They stop in reverse, one after the other, which is the stop order of operations
contract §6: draining at once (listeners stay open, new requests get 503), wait for the
requests in flight and for their handlers to queue their settlements (cut what is still
running at ``--shutdown-grace``), close the listeners, then close the app, which commits every
queued settlement before the wallets, shared state and database close.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from twisted.application import strports
from twisted.application.service import MultiService, Service
from twisted.internet.defer import Deferred, ensureDeferred
from twisted.internet.task import LoopingCall
from twisted.logger import Logger

from console.routes.updates import BUILD_VERSION
from gateway.observability.tracing import Tracing
from tap.access_log import redacting_log_formatter
from tap.app import Lockgate
from tap.dispatch_budget import DispatchBudget
from tap.drain import CountingSite, InFlight, within
from tap.interpreter_tuning import tune_interpreter
from tap.json_log import install
from tap.latency_trace import install as install_latency_trace
from tap.listen_backlog import with_backlog
from tap.metrics_listener import MeteredSite, metrics_site
from tap.open_files import raise_open_file_limit
from tap.options import Options
from tap.ordered_services import OrderedServices
from tap.secrets import load_or_create
from tap.startup_report import report_opened, report_setup
from tap.state_factory import open_state
from tap.stream_start_trace import install as install_stream_trace
from tap.worker_mode import WorkerSlot, listeners

log = Logger()


class LockgateService(OrderedServices):
    """Opens the app on start (DB -> migrations -> state -> caches), then listens; its
    children stop in reverse order (drain, listeners, app)."""

    def __init__(self, options: dict[str, Any], reactor: Any) -> None:
        super().__init__()
        self.options = options
        self.reactor = reactor
        self.app: Lockgate | None = None
        self.in_flight = InFlight()
        self.failed_to_start = False
        #: twistd's own options (``--logfile``, ``-n``), when run by twistd
        self.twistd_options: Any = None
        #: this process's place under a ``--workers`` supervisor (None: on its own)
        self.worker = WorkerSlot.from_environ(os.environ)

    def startService(self) -> None:
        raise_open_file_limit()
        secret_created = not os.path.exists(self.options["secret-file"])
        secrets = load_or_create(self.options["secret-file"])
        hub = self.worker.hub(self.reactor) if self.worker is not None else None
        state = hub[0] if hub is not None else open_state(self.reactor, self.options.get("redis"))
        if hub is not None:
            hub[0].lost.addCallback(self._hub_lost)
        if self.worker is not None:
            self._watch_supervisor(os.getppid())
        self.app = Lockgate.open(
            self.reactor, database=self.options["database"], secrets=secrets, state=state,
            trusted_proxies=self.options.get("trusted-proxies") or "",
            db_threads=self.options.get("db-threads"),
            run_migrations=not self.options.get("no-migrate"),
            metrics=bool(self.options.get("metrics-listen")),
            tracing=(Tracing(self.options["otlp-endpoint"], version=BUILD_VERSION)
                     if self.options.get("otlp-endpoint") else None),
            node_name=self.options.get("node-name") or "",
            wallets=hub[1] if hub is not None else None,
        )
        self.app.services.setServiceParent(self)  # first child: the last to stop
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
        install_latency_trace(os.environ, self.reactor)  # bench only: off unless set
        install_stream_trace(os.environ, self.reactor)  # bench only: off unless set
        metrics = self.app.metrics
        site = (CountingSite(self.app.root, self.in_flight, logFormatter=redacting_log_formatter,
                             access_log=self.options["access-log"]) if metrics is None else
                MeteredSite(self.app.root, self.in_flight, metrics,
                            logFormatter=redacting_log_formatter,
                            access_log=self.options["access-log"]))
        site.displayTracebacks = False
        per_turn = int(self.options.get("dispatch-per-turn") or 0)
        if per_turn:
            site.dispatch_budget = DispatchBudget(self.reactor, per_turn, self.in_flight)
        site.noisy = False  # no "Starting factory" lines; report_setup says what listens
        if self.worker is not None:
            site.worker_label = self.worker.label
        for listener in listeners([with_backlog(e) for e in self.options["listen"]], site,
                                  self.reactor, self.worker):
            listener.setServiceParent(self)
        endpoints = list(self.options["listen"])
        if metrics is not None:
            in_flight = self.in_flight
            metrics.sources.draining = lambda: in_flight.draining
            strports.service(self.options["metrics-listen"],
                             metrics_site(metrics, self.app.root)).setServiceParent(self)
            endpoints.append(f"{self.options['metrics-listen']} (metrics)")
        Drain(self).setServiceParent(self)  # last child: the first to stop
        OrderedServices.startService(self)
        log.info("Lockgate listening on {endpoints}", endpoints=", ".join(endpoints))
        ensureDeferred(report_setup(self.app.db, self.options["listen"])).addErrback(
            lambda failure: log.failure("start-up report failed", failure))

    def _watch_supervisor(self, supervisor_pid: int) -> None:
        """With ``--redis`` a worker has no hub socket whose close would tell it that the
        supervisor died; the kernel re-parents an orphan, so a changed parent pid says it."""
        def check() -> None:
            if os.getppid() != supervisor_pid:
                watch.stop()
                self._hub_lost(None)

        watch = LoopingCall(check)
        watch.clock = self.reactor
        watch.start(1.0, now=False)

    def _hub_lost(self, _: Any) -> None:
        # the supervisor is gone: nobody shares this worker's money holds any more
        log.error("Lockgate worker: the supervisor is gone, stopping")
        if self.reactor.running:
            self.reactor.stop()

    def _failed(self, failure: Any) -> None:
        log.failure("Lockgate failed to start", failure)
        self.failed_to_start = True
        # twistd calls startService before the reactor runs: stop it once it does, and leave
        # with a failure status (twistd itself would exit 0 after an ordinary stop)
        self.reactor.addSystemEventTrigger("after", "shutdown", exit_failed)
        self.reactor.callWhenRunning(self.reactor.stop)

    def stopService(self) -> Deferred[None]:
        """Drain (operations contract §6), then close the listeners and the app: the
        children in reverse order, also when the start failed half-way."""
        self.in_flight.draining = True
        Service.stopService(self)
        return ensureDeferred(self.stop_children())


class Drain(Service):
    """The last child of the process's service, so the first to stop: waits for the
    requests in flight, then for their handlers to queue their settlements; at the grace
    deadline it cuts the calls still running."""

    def __init__(self, owner: LockgateService) -> None:
        self.setName("drain")
        self.owner = owner

    def stopService(self) -> Deferred[None]:
        super().stopService()
        self.owner.in_flight.draining = True
        return ensureDeferred(self._drain())

    async def _drain(self) -> None:
        owner = self.owner
        if owner.failed_to_start or owner.app is None:
            return
        clock = owner.reactor
        grace = float(owner.options["shutdown-grace"])
        calls = owner.app.gateway.calls
        started = clock.seconds()
        log.info("Lockgate draining: {requests} requests in flight, up to {grace:g} s",
                 requests=owner.in_flight.count, grace=grace)
        await owner.in_flight.drained(clock, grace)
        remaining = grace - (clock.seconds() - started)
        await within(calls.idle(), clock, remaining)
        if calls.count:
            cut = calls.cut_all()
            log.warn("Lockgate drain: grace over, {cut} calls still running were cut", cut=cut)
            await within(calls.idle(), clock, CUT_WAIT)


#: how long cut calls get to end their streams and queue their settlements
CUT_WAIT = 2.0


def exit_failed() -> None:
    """Leave the process with status 1 (after the reactor stopped and the app closed)."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(1)


def makeService(options: Options) -> MultiService | Service:
    from twisted.internet import reactor

    if options["workers"] > 1:
        from tap.supervisor import Supervisor

        supervisor = Supervisor(dict(options), reactor, options["workers"])
        supervisor.twistd_options = getattr(options, "parent", None)
        return supervisor
    service = LockgateService(dict(options), reactor)
    service.twistd_options = getattr(options, "parent", None)
    return service
