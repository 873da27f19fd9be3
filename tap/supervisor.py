"""``twistd -n lockgate --workers N``: one supervisor process and N worker processes.

The supervisor serves no request itself.  It does what must happen once per machine, then
keeps N ordinary Lockgate processes running:

1. creates the secret file and applies the migrations (N processes racing Alembic or the
   secret's creation would fail or disagree), then closes that engine;
2. opens the listening sockets, one ``SO_REUSEPORT`` socket per worker and endpoint
   (``tap.worker_sockets`` says why);
3. without ``--redis``, serves the state hub on a private Unix socket (``gateway.hub``): the
   rate-limit windows, counters, claims, the invalidation bus and the money holds of every
   worker, so that N workers on one SQLite file admit exactly what one process would.  With
   ``--redis`` the workers share state through Redis as any fleet does;
4. starts worker i as ``twistd -n lockgate`` with its sockets inherited and ``--no-migrate``
   (``tap.worker_mode``), and restarts a worker that exits unasked, after a back-off that
   doubles while it keeps dying young (0.5 s up to 30 s);
5. on SIGTERM, sends SIGTERM to every worker -- each runs its own drain (operations contract
   §6) -- waits for all of them (SIGKILL after ``--shutdown-grace`` + 10 s), closes the hub
   and exits.

Metrics: each worker serves ``--metrics-listen`` on its own port, the given port + its index
(0, 1, ...).  Counters are per process (contract §2), so a scrape must reach each process on
an address of its own anyway -- one listener of the supervisor could not answer for them.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import sys
import tempfile
from typing import Any

from twisted.application.service import Service
from twisted.internet.defer import Deferred, DeferredList
from twisted.internet.error import ProcessExitedAlready
from twisted.internet.protocol import ProcessProtocol
from twisted.logger import Logger
from twisted.python.failure import Failure

from gateway.hub.server import HubFactory
from gateway.ledger.wallet_authority import WalletAuthority
from gateway.store import migrate
from gateway.store.pool import DBRunner, make_engine
from tap.json_log import install
from tap.options import _SCALARS
from tap.secrets import load_or_create
from tap.worker_mode import environ_for
from tap.worker_sockets import open_shared, parse_tcp

log = Logger()

#: first restart delay and its cap; a worker that lived this long resets the back-off
FIRST_BACKOFF = 0.5
MAX_BACKOFF = 30.0
HEALTHY_AFTER = 10.0
#: how long after the grace a worker may take before it is killed
KILL_AFTER_GRACE = 10.0
FIRST_INHERITED_FD = 3


class _WorkerProcess(ProcessProtocol):
    """One worker; with ``--logfile`` its output comes through here, line by line."""

    def __init__(self, supervisor: Supervisor, index: int) -> None:
        self.supervisor = supervisor
        self.index = index
        self.ended: Deferred[None] = Deferred()
        self.log = Logger(namespace=f"lockgate.worker.{index}")
        self._partial: dict[int, bytes] = {}

    def childDataReceived(self, childFD: int, data: bytes) -> None:
        lines = (self._partial.pop(childFD, b"") + data).split(b"\n")
        if lines[-1]:
            self._partial[childFD] = lines[-1]
        for line in lines[:-1]:
            if line:
                self.log.info("{line}", line=line.decode("utf-8", "replace"))

    def processEnded(self, reason: Failure) -> None:
        self.supervisor._ended(self, reason)
        self.ended.callback(None)


class Supervisor(Service):
    """Keeps ``count`` workers running on shared sockets (and their state hub)."""

    def __init__(self, options: dict[str, Any], reactor: Any, count: int) -> None:
        self.setName("supervisor")
        self.options = options
        self.reactor = reactor
        self.count = count
        self.twistd_options: Any = None
        self.stopping = False
        self.failed = False
        self.workers: dict[int, _WorkerProcess] = {}
        self.started_at: dict[int, float] = {}
        self.backoff: dict[int, float] = {}
        self.restarts: dict[int, Any] = {}
        self.sockets: list[list[socket.socket]] = []
        self.hub_dir = ""
        self.hub_path = ""
        self.hub_port: Any = None
        self.db: DBRunner | None = None

    def setServiceParent(self, parent: Any) -> Any:
        install(parent, self.options.get("log-format", "human"), self.twistd_options)
        return super().setServiceParent(parent)

    # --- start ------------------------------------------------------------------------------

    def startService(self) -> None:
        super().startService()
        try:
            self._prepare()
        except Exception:
            log.failure("Lockgate supervisor failed to start")
            self.failed = True
            from tap.service import exit_failed

            self._close()
            self.reactor.addSystemEventTrigger("after", "shutdown", exit_failed)
            self.reactor.callWhenRunning(self.reactor.stop)
            return
        self.reactor.callWhenRunning(self._start_all)

    def _prepare(self) -> None:
        load_or_create(self.options["secret-file"])
        engine, threads = make_engine(self.options["database"], self.options.get("db-threads"))
        if not self.options.get("no-migrate"):
            migrate.upgrade(engine)
        endpoints = [parse_tcp(endpoint) for endpoint in self.options["listen"]]
        if self.options.get("metrics-listen"):
            parse_tcp(self.options["metrics-listen"])  # refused early if not shareable
        for endpoint in endpoints:
            self.sockets.append(open_shared(endpoint, self.count))
        if self.options.get("redis"):
            engine.dispose()
            return
        self.db = DBRunner(self.reactor, engine, threads)
        self.db.start()
        self.hub_dir = tempfile.mkdtemp(prefix="lockgate-hub-")
        self.hub_path = os.path.join(self.hub_dir, "hub.sock")
        self.hub_port = self.reactor.listenUNIX(
            self.hub_path, HubFactory(self.reactor, WalletAuthority(self.db)), mode=0o600)

    def _start_all(self) -> None:
        ports = ", ".join(str(group[0].getsockname()[1]) for group in self.sockets)
        log.info("Lockgate supervisor: {n} workers on port(s) {ports}, shared state: {state}",
                 n=self.count, ports=ports,
                 state="Redis" if self.options.get("redis") else "the supervisor's hub")
        for index in range(self.count):
            self._spawn(index)

    def _spawn(self, index: int) -> None:
        self.restarts.pop(index, None)
        if self.stopping:
            return
        logfile = (self.twistd_options or {}).get("logfile") if self.twistd_options else None
        # a log file written by N processes at once (twistd's does not append atomically)
        # mangles lines: with --logfile the workers' output reaches it through this process
        relayed = bool(logfile) and logfile != "-"
        child_fds: dict[int, Any] = ({0: "w", 1: "r", 2: "r"} if relayed else
                                     {0: "w", 1: 1, 2: 2})
        inherited = []
        for offset, group in enumerate(self.sockets):
            child_fds[FIRST_INHERITED_FD + offset] = group[index].fileno()
            inherited.append((FIRST_INHERITED_FD + offset, group[index].family))
        argv = [sys.executable, "-c", "from twisted.scripts.twistd import run; run()",
                "--nodaemon", "--pidfile="]
        argv += ["--logfile=-", "lockgate"]
        environ = self.worker_environment(index)
        environ.update(environ_for(index, inherited, self.hub_path))
        process = _WorkerProcess(self, index)
        self.reactor.spawnProcess(process, sys.executable, argv, env=environ,
                                  childFDs=child_fds)
        self.workers[index] = process
        self.started_at[index] = self.reactor.seconds()
        log.info("Lockgate worker {index} started (pid {pid})", index=index,
                 pid=getattr(process.transport, "pid", None))

    def worker_environment(self, index: int) -> dict[str, str]:
        """This process's environment without ``LOCKGATE_*``, plus every option as resolved
        here (so a worker sees exactly the supervisor's configuration, with no secrets on a
        command line), its metrics port and ``--no-migrate``."""
        environ = {name: value for name, value in os.environ.items()
                   if not name.startswith("LOCKGATE_")}
        for name, (variable, _default) in _SCALARS.items():
            value = self.options.get(name)
            if value is not None:
                environ[variable] = str(value)
        environ["LOCKGATE_LISTEN"] = " ".join(self.options["listen"])
        environ["LOCKGATE_NO_MIGRATE"] = "true"
        environ["LOCKGATE_WORKERS"] = "1"
        metrics = self.options.get("metrics-listen")
        if metrics:
            endpoint = parse_tcp(metrics)
            port = endpoint.port + index if endpoint.port else 0
            environ["LOCKGATE_METRICS_LISTEN"] = endpoint.with_port(port)
        node = self.options.get("node-name") or ""
        if node:
            environ["LOCKGATE_NODE_NAME"] = f"{node}-w{index}"
        return environ

    # --- a worker ended ---------------------------------------------------------------------

    def _ended(self, process: _WorkerProcess, reason: Failure) -> None:
        index = process.index
        if self.workers.get(index) is process:
            del self.workers[index]
        status = getattr(reason.value, "exitCode", None)
        signal_number = getattr(reason.value, "signal", None)
        how = f"signal {signal_number}" if signal_number else f"status {status}"
        if self.stopping:
            log.info("Lockgate worker {index} exited ({how})", index=index, how=how)
            return
        lived = self.reactor.seconds() - self.started_at.get(index, 0.0)
        delay = FIRST_BACKOFF if lived >= HEALTHY_AFTER else min(
            MAX_BACKOFF, self.backoff.get(index, FIRST_BACKOFF / 2) * 2)
        self.backoff[index] = delay
        log.warn("Lockgate worker {index} exited unasked ({how}); restarting in {delay:g} s",
                 index=index, how=how, delay=delay)
        self.restarts[index] = self.reactor.callLater(delay, self._spawn, index)

    # --- stop -------------------------------------------------------------------------------

    def stopService(self) -> Deferred[None]:
        super().stopService()
        self.stopping = True
        for call in self.restarts.values():
            if call.active():
                call.cancel()
        self.restarts.clear()
        processes = list(self.workers.values())
        for process in processes:
            self._signal(process, signal.SIGTERM)
        deadline = float(self.options.get("shutdown-grace") or 0) + KILL_AFTER_GRACE

        def kill() -> None:
            for process in processes:
                if not process.ended.called:
                    log.warn("Lockgate worker {index} did not stop in time: killed",
                             index=process.index)
                    self._signal(process, signal.SIGKILL)

        killer = self.reactor.callLater(deadline, kill)
        done: Deferred[Any] = DeferredList([process.ended for process in processes])

        def closed(_: Any) -> None:
            if killer.active():
                killer.cancel()
            self._close()
            log.info("Lockgate supervisor: every worker stopped")

        return done.addCallback(closed)

    @staticmethod
    def _signal(process: _WorkerProcess, number: int) -> None:
        with contextlib.suppress(ProcessExitedAlready):  # it ended meanwhile
            if process.transport is not None:
                process.transport.signalProcess(number)

    def _close(self) -> None:
        if self.hub_port is not None:
            self.hub_port.stopListening()
            self.hub_port = None
        if self.db is not None:
            self.db.stop()
            self.db = None
        for group in self.sockets:
            for sock in group:
                sock.close()
        self.sockets = []
        if self.hub_dir:
            shutil.rmtree(self.hub_dir, ignore_errors=True)
            self.hub_dir = ""
