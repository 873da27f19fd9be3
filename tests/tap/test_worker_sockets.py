"""``--workers``: the option, the endpoint strings it can share, and the shared sockets."""

from __future__ import annotations

import os
import socket

from twisted.python import usage
from twisted.trial.unittest import TestCase

from tap.options import resolve
from tap.supervisor import Supervisor
from tap.worker_mode import WorkerSlot, environ_for
from tap.worker_sockets import UnsupportedEndpoint, open_shared, parse_tcp


class WorkersOptionTests(TestCase):
    def resolved(self, **given: str) -> dict[str, object]:
        options: dict[str, object] = {"listen": [], **given}
        resolve(options, {})
        return options

    def test_default_is_one_and_auto_is_the_cores(self) -> None:
        assert self.resolved()["workers"] == 1
        assert self.resolved(workers="auto")["workers"] == len(os.sched_getaffinity(0))
        assert self.resolved(workers=" 3 ")["workers"] == 3

    def test_bad_counts_are_refused(self) -> None:
        for bad in ("0", "65", "two", ""):
            with self.assertRaises(usage.UsageError):
                self.resolved(workers=bad)


class EndpointTests(TestCase):
    def test_tcp_forms(self) -> None:
        plain = parse_tcp("tcp:8080:interface=127.0.0.1")
        assert (plain.family, plain.port, plain.interface) == (socket.AF_INET, 8080, "127.0.0.1")
        assert parse_tcp("tcp:port=81:backlog=7").backlog == 7
        assert parse_tcp("8080").interface == "0.0.0.0"
        six = parse_tcp(r"tcp6:9000:interface=\:\:1")
        assert (six.family, six.interface) == (socket.AF_INET6, "::1")
        assert parse_tcp(six.with_port(9001)) == parse_tcp(r"tcp6:9001:interface=\:\:1")

    def test_endpoints_that_cannot_be_shared_are_refused(self) -> None:
        for bad in ("unix:/tmp/x.sock", "ssl:443", "tcp:interface=127.0.0.1",
                    "tcp:80:reuse=1"):
            with self.assertRaises(UnsupportedEndpoint):
                parse_tcp(bad)

    def test_open_shared_binds_every_socket_to_one_port(self) -> None:
        sockets = open_shared(parse_tcp("tcp:0:interface=127.0.0.1"), 3)
        self.addCleanup(lambda: [sock.close() for sock in sockets])
        ports = {sock.getsockname()[1] for sock in sockets}
        assert len(ports) == 1 and ports != {0}
        client = socket.create_connection(("127.0.0.1", ports.pop()), timeout=5)
        client.close()


class WorkerEnvironmentTests(TestCase):
    def test_a_worker_gets_the_resolved_options_its_slot_and_its_metrics_port(self) -> None:
        options: dict[str, object] = {"listen": ["tcp:8080:interface=127.0.0.1"],
                                      "metrics-listen": "tcp:9100:interface=127.0.0.1",
                                      "database": "sqlite:///x.db", "node-name": "n"}
        resolve(options, {})
        supervisor = Supervisor(options, reactor=None, count=2)
        environ = supervisor.worker_environment(1)
        environ.update(environ_for(1, [(3, socket.AF_INET)], "/tmp/hub.sock"))
        assert environ["LOCKGATE_DATABASE"] == "sqlite:///x.db"
        assert environ["LOCKGATE_NO_MIGRATE"] == "true"
        assert environ["LOCKGATE_WORKERS"] == "1"
        assert environ["LOCKGATE_NODE_NAME"] == "n-w1"
        assert parse_tcp(environ["LOCKGATE_METRICS_LISTEN"]).port == 9101
        slot = WorkerSlot.from_environ(environ)
        assert slot == WorkerSlot(1, ((3, socket.AF_INET),), "/tmp/hub.sock")
        assert WorkerSlot.from_environ({}) is None
