"""The composition root's service tree: pieces start in the order built and stop one at a time
in reverse, each after the one built on it has finished stopping (operations contract §6)."""

from __future__ import annotations

import gc
import shutil
import tempfile

from twisted.application.internet import StreamServerEndpointService
from twisted.application.service import Service
from twisted.internet import reactor
from twisted.internet.defer import Deferred
from twisted.trial import unittest

from tap.options import Options
from tap.ordered_services import OrderedServices, Piece
from tap.service import Drain, LockgateService
from tests.support.app import AppTestCase


class Recorded(Service):
    """A child whose stop stays pending until the test fires it."""

    def __init__(self, name: str, events: list[str]) -> None:
        self.setName(name)
        self.events = events
        self.stopping: Deferred[None] | None = None

    def startService(self) -> None:
        super().startService()
        self.events.append(f"start {self.name}")

    def stopService(self) -> Deferred[None]:
        super().stopService()
        self.events.append(f"stop {self.name}")
        self.stopping = Deferred()
        return self.stopping


class OrderedServicesTests(unittest.TestCase):
    def test_children_start_in_order_and_stop_one_by_one_in_reverse(self) -> None:
        events: list[str] = []
        root = OrderedServices()
        children = [Recorded(name, events) for name in ("database", "wallets", "settler")]
        for child in children:
            child.setServiceParent(root)
        root.startService()
        assert events == ["start database", "start wallets", "start settler"]
        stopped = root.stopService()
        # the settler stops first; the wallets wait until its flush is over
        assert events[3:] == ["stop settler"]
        assert children[2].stopping is not None
        children[2].stopping.callback(None)
        assert events[3:] == ["stop settler", "stop wallets"]
        assert not stopped.called
        assert children[1].stopping is not None
        children[1].stopping.callback(None)
        assert children[0].stopping is not None
        children[0].stopping.callback(None)
        assert events[3:] == ["stop settler", "stop wallets", "stop database"]
        assert stopped.called

    def test_a_child_added_to_a_running_tree_starts_at_once_and_is_not_started_twice(
            self) -> None:
        events: list[str] = []
        root = OrderedServices()
        root.startService()
        Piece("database", start=lambda: events.append("db up"),
              stop=lambda: events.append("db down")).setServiceParent(root)
        assert events == ["db up"]
        parent = OrderedServices()
        root.setServiceParent(parent)
        parent.startService()  # the tree was running already: nothing starts again
        assert events == ["db up"]
        parent.stopService()
        assert events == ["db up", "db down"]

    def test_a_child_that_fails_to_stop_does_not_keep_the_others_running(self) -> None:
        events: list[str] = []
        root = OrderedServices()
        Piece("database", stop=lambda: events.append("db down")).setServiceParent(root)

        def broken() -> None:
            raise RuntimeError("flush failed")

        Piece("settler", stop=broken).setServiceParent(root)
        root.startService()
        done = root.stopService()
        assert done.called and events == ["db down"]
        assert len(self.flushLoggedErrors(RuntimeError)) == 1

    def test_a_coroutine_stop_is_awaited(self) -> None:
        events: list[str] = []
        gate: Deferred[None] = Deferred()
        root = OrderedServices()
        Piece("database", stop=lambda: events.append("db down")).setServiceParent(root)

        async def flush() -> None:
            await gate
            events.append("flushed")

        Piece("settler", stop=flush).setServiceParent(root)
        root.startService()
        done = root.stopService()
        assert events == [] and not done.called
        gate.callback(None)
        assert events == ["flushed", "db down"] and done.called

    def test_stopping_twice_stops_once(self) -> None:
        events: list[str] = []
        root = OrderedServices()
        Piece("database", stop=lambda: events.append("db down")).setServiceParent(root)
        root.startService()
        root.stopService()
        root.stopService()
        assert events == ["db down"]


class AppTreeTests(AppTestCase):
    def test_the_app_pieces_stop_after_what_is_built_on_them(self) -> None:
        names = [service.name for service in self.app.services]
        assert names[:5] == ["database", "shared state", "live settings", "password hashing",
                             "invalidation"]
        gateway = names.index("data plane")  # its own tree, after the caches
        tree = list(self.app.services)[gateway]
        assert isinstance(tree, OrderedServices)
        plane = [service.name for service in tree]
        assert plane == ["upstream client", "wallets", "settler"]
        assert names[gateway + 1:gateway + 4] == ["task poller", "order expiry",
                                                  "log retention"]
        assert all(service.running for service in self.app.services)


class ProcessTreeTests(unittest.TestCase):
    """``twistd lockgate``'s own service, in this process: the app's tree, the listener and
    the drain are its children, and a stop runs them in reverse -- drain, listener, app --
    down to the database."""

    def setUp(self) -> None:
        # the service tunes the collector once it listens (``tap.interpreter_tuning``)
        thresholds = gc.get_threshold()
        self.addCleanup(lambda: (gc.unfreeze(), gc.set_threshold(*thresholds)))

    async def test_drain_then_listeners_then_the_app_down_to_the_database(self) -> None:
        directory = tempfile.mkdtemp(prefix="lockgate-tree-")
        self.addCleanup(shutil.rmtree, directory, True)
        options = Options()
        options.parseOptions(["--listen", "tcp:0:interface=127.0.0.1",
                              "--database", f"sqlite:///{directory}/db.sqlite3",
                              "--secret-file", f"{directory}/secret", "--access-log", "off",
                              "--shutdown-grace", "1"])
        service = LockgateService(dict(options), reactor)
        service.startService()
        app = service.app
        assert app is not None
        children = list(service)
        assert children[0] is app.services
        assert isinstance(children[1], StreamServerEndpointService)
        assert isinstance(children[2], Drain) and len(children) == 3
        assert all(child.running for child in children)
        port = await children[1]._waitingForPort  # type: ignore[attr-defined]
        assert port.connected
        seen: list[tuple[bool, bool]] = []
        # a piece built last in the app stops first in it: the drain and the listener are over
        Piece("probe", stop=lambda: seen.append(
            (service.in_flight.draining, port.connected))).setServiceParent(app.services)
        await service.stopService()
        assert seen == [(True, False)]
        assert not any(child.running for child in children)
        assert not any(piece.running for piece in app.services)
