"""``--listen`` endpoints get a listen queue long enough for a burst of new connections.

The last test listens for real and reads the queue length the kernel reports for the socket
(``ss``: a listening socket's Send-Q is its backlog).
"""

from __future__ import annotations

import shutil
import subprocess

from twisted.internet import reactor
from twisted.internet.endpoints import serverFromString
from twisted.internet.protocol import Factory, Protocol
from twisted.trial.unittest import SkipTest, TestCase

from tap.listen_backlog import LISTEN_BACKLOG, with_backlog


def listen_queue_of(port: int) -> int:
    """The backlog of the socket listening on 127.0.0.1:``port``, as the kernel reports it."""
    if shutil.which("ss") is None:
        raise SkipTest("ss is not installed")
    out = subprocess.run(["ss", "-ltnH", f"sport = :{port}"], check=True,
                         capture_output=True, text=True).stdout
    [line] = out.strip().splitlines()
    return int(line.split()[2])


def somaxconn() -> int:
    with open("/proc/sys/net/core/somaxconn") as handle:
        return int(handle.read())


class WithBacklogTests(TestCase):
    def test_tcp_without_a_backlog_gets_the_default(self) -> None:
        assert (with_backlog("tcp:8080:interface=127.0.0.1")
                == f"tcp:8080:interface=127.0.0.1:backlog={LISTEN_BACKLOG}")

    def test_tcp6_and_unix_get_it_too(self) -> None:
        assert (with_backlog(r"tcp6:8080:interface=\:\:1", 64)
                == r"tcp6:8080:interface=\:\:1:backlog=64")
        assert with_backlog("unix:/run/lockgate.sock", 64) == "unix:/run/lockgate.sock:backlog=64"

    def test_an_explicit_backlog_is_kept(self) -> None:
        assert with_backlog("tcp:8080:backlog=10") == "tcp:8080:backlog=10"

    def test_other_endpoint_types_are_unchanged(self) -> None:
        assert with_backlog("systemd:domain=INET:index=0") == "systemd:domain=INET:index=0"

    async def test_a_listener_made_from_it_has_that_queue(self) -> None:
        port = await serverFromString(
            reactor, with_backlog("tcp:0:interface=127.0.0.1", 1000)).listen(
                Factory.forProtocol(Protocol))
        self.addCleanup(port.stopListening)
        assert listen_queue_of(port.getHost().port) == min(1000, somaxconn())
        plain = await serverFromString(reactor, "tcp:0:interface=127.0.0.1").listen(
            Factory.forProtocol(Protocol))
        self.addCleanup(plain.stopListening)
        assert listen_queue_of(plain.getHost().port) == 50  # what it replaces
