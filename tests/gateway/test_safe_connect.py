"""The outbound-safety connector: resolve once, check every address, connect to a checked one.

A ``MemoryReactorClock`` records every ``connectTCP`` (host, port) the connector makes, and
``ScriptedNames`` decides what each name resolves to -- including an answer that changes
between lookups, as a rebinding DNS server would.
"""

from __future__ import annotations

from typing import Any

from twisted.internet.address import IPv4Address
from twisted.internet.defer import CancelledError
from twisted.internet.error import (
    ConnectingCancelledError,
    ConnectionRefusedError,
    DNSLookupError,
)
from twisted.internet.interfaces import IHostnameResolver
from twisted.internet.protocol import Factory, Protocol
from twisted.internet.testing import MemoryReactorClock, StringTransport
from twisted.python.failure import Failure
from twisted.trial.unittest import TestCase
from twisted.web.client import URI
from zope.interface import implementer

from gateway.channels.net_policy import UrlPolicy
from gateway.channels.safe_connect import (
    AddressRefused,
    AddressVetter,
    GuardedEndpoint,
    GuardedEndpointFactory,
    LivePolicy,
)
from gateway.settings.store import Settings
from tests.support.names import ScriptedNames

STRICT = UrlPolicy.from_entries()
PUBLIC = "93.184.216.34"


class ConnectorTests(TestCase):
    def setUp(self) -> None:
        self.reactor = MemoryReactorClock()
        self.names = ScriptedNames({
            "loop.example": [["127.0.0.1"]],
            "rebind.example": [[PUBLIC], ["127.0.0.1"]],
            "mixed.example": [[PUBLIC, "10.1.2.3"]],
            "meta.example": [["169.254.169.254"]],
            "api.example": [[PUBLIC]],
        }).install(self, self.reactor)
        self.vetter = AddressVetter(self.reactor, ttl=30)

    def endpoint(self, host: str, policy: UrlPolicy = STRICT, port: int = 443) -> Any:
        return GuardedEndpoint(self.reactor, self.vetter, host, port, policy, timeout=5)

    def connected_hosts(self) -> list[tuple[str, int]]:
        return [(host, port) for host, port, *_ in self.reactor.tcpClients]

    def test_a_name_resolving_to_loopback_is_refused_before_any_connection(self) -> None:
        failure = self.failureResultOf(self.endpoint("loop.example").connect(
            Factory.forProtocol(Protocol)), AddressRefused)
        message = str(failure.value)
        self.assertIn("127.0.0.1", message)
        self.assertIn("ssrf_allow_private_networks", message)
        self.assertIn("ssrf_allowed_hosts", message)
        self.assertEqual(self.connected_hosts(), [])

    def test_every_resolved_address_is_checked(self) -> None:
        self.failureResultOf(self.endpoint("mixed.example").connect(
            Factory.forProtocol(Protocol)), AddressRefused)
        self.failureResultOf(self.endpoint("meta.example", UrlPolicy.from_entries(
            allow_private=True)).connect(Factory.forProtocol(Protocol)), AddressRefused)
        self.assertEqual(self.connected_hosts(), [])

    def test_the_policy_decides(self) -> None:
        open_private = UrlPolicy.from_entries(allow_private=True)
        self.endpoint("loop.example", open_private, 8080).connect(Factory.forProtocol(Protocol))
        listed = UrlPolicy.from_entries(allowed_hosts=["loop.example"])
        self.endpoint("loop.example", listed, 8081).connect(Factory.forProtocol(Protocol))
        self.assertEqual(self.connected_hosts(), [("127.0.0.1", 8080), ("127.0.0.1", 8081)])

    def test_a_changed_dns_answer_does_not_pass(self) -> None:
        """Check and connect use the same lookup: the public answer is what gets connected to,
        and the loopback answer that follows is refused, never connected to."""
        self.endpoint("rebind.example").connect(Factory.forProtocol(Protocol))
        self.assertEqual(self.connected_hosts(), [(PUBLIC, 443)])
        self.assertEqual(self.names.asked, ["rebind.example"])
        # within the TTL the checked verdict is reused: no lookup, same checked address
        self.endpoint("rebind.example").connect(Factory.forProtocol(Protocol))
        self.assertEqual(self.names.asked, ["rebind.example"])
        self.assertEqual(self.vetter.lookups, 1)
        # after it, the name now answers loopback: refused, and nothing connects there
        self.reactor.advance(31)
        self.failureResultOf(self.endpoint("rebind.example").connect(
            Factory.forProtocol(Protocol)), AddressRefused)
        self.assertEqual(self.connected_hosts(), [(PUBLIC, 443), (PUBLIC, 443)])

    def test_verdicts_are_cached_per_policy(self) -> None:
        self.failureResultOf(self.endpoint("loop.example").connect(
            Factory.forProtocol(Protocol)), AddressRefused)
        self.failureResultOf(self.endpoint("loop.example").connect(
            Factory.forProtocol(Protocol)), AddressRefused)
        self.assertEqual(self.vetter.lookups, 1)
        self.endpoint("loop.example", UrlPolicy.from_entries(allow_private=True)).connect(
            Factory.forProtocol(Protocol))
        self.assertEqual(self.vetter.lookups, 2)
        self.assertEqual(self.connected_hosts(), [("127.0.0.1", 443)])

    def test_literals_and_local_names_need_no_lookup(self) -> None:
        for host in ("127.0.0.1", "localhost", "metadata.google.internal", "169.254.169.254"):
            self.failureResultOf(self.endpoint(host).connect(Factory.forProtocol(Protocol)),
                                 AddressRefused)
        self.endpoint("::1", UrlPolicy.from_entries(allow_private=True), 9).connect(
            Factory.forProtocol(Protocol))
        self.assertEqual(self.names.asked, [])
        self.assertEqual(self.connected_hosts(), [("::1", 9)])

    def test_an_unknown_name_fails_as_a_dns_error_and_is_not_cached(self) -> None:
        names = ScriptedNames({"gone.example": [[], [PUBLIC]]}).install(self, self.reactor)
        self.failureResultOf(self.endpoint("gone.example").connect(
            Factory.forProtocol(Protocol)), DNSLookupError)
        self.endpoint("gone.example").connect(Factory.forProtocol(Protocol))
        self.assertEqual(names.asked, ["gone.example", "gone.example"])
        self.assertEqual(self.connected_hosts(), [(PUBLIC, 443)])

    def test_cancelling_during_the_lookup_connects_nowhere(self) -> None:
        receivers: list[Any] = []

        @implementer(IHostnameResolver)
        class Slow:
            def resolveHostName(self, receiver: Any, hostName: str, portNumber: int = 0,
                                addressTypes: Any = None, transportSemantics: str = "TCP"
                                ) -> None:
                receivers.append(receiver)

        self.reactor.installNameResolver(Slow())
        attempt = self.endpoint("slow.example").connect(Factory.forProtocol(Protocol))
        attempt.cancel()  # e.g. the relay's first-byte timeout
        self.failureResultOf(attempt, CancelledError)
        receivers[0].addressResolved(IPv4Address("TCP", PUBLIC, 443))
        receivers[0].resolutionComplete()  # the late answer is dropped quietly
        self.assertEqual(self.connected_hosts(), [])

    def test_a_connection_on_a_cached_verdict_succeeds_fails_and_cancels_as_the_first(
            self) -> None:
        """The first connection looks the name up; later ones within the TTL take the
        cached verdict's one address (no coroutine): they go to the same checked address,
        hand over the protocol once connected, fail with the connect error, and a cancel
        stops the connector."""
        outcomes: list[Any] = []
        for _ in range(4):
            attempt = self.endpoint("api.example").connect(Factory.forProtocol(Protocol))
            attempt.addBoth(outcomes.append)
        self.assertEqual(self.names.asked, ["api.example"])
        self.assertEqual(self.connected_hosts(), [(PUBLIC, 443)] * 4)
        made = self.reactor.tcpClients[0][2].buildProtocol(None)
        made.makeConnection(StringTransport())
        cached = self.reactor.tcpClients[1][2].buildProtocol(None)
        cached.makeConnection(StringTransport())
        self.reactor.tcpClients[2][2].clientConnectionFailed(
            self.reactor.connectors[2], Failure(ConnectionRefusedError()))
        self.assertEqual(len(outcomes), 3)  # the fourth is still connecting
        self.assertIsInstance(outcomes[0], Protocol)
        self.assertIsInstance(outcomes[1], Protocol)
        self.assertTrue(outcomes[2].check(ConnectionRefusedError))

    def test_cancelling_a_connection_on_a_cached_verdict_stops_connecting(self) -> None:
        first = self.endpoint("api.example").connect(Factory.forProtocol(Protocol))
        first.cancel()
        self.failureResultOf(first, ConnectingCancelledError)
        second = self.endpoint("api.example").connect(Factory.forProtocol(Protocol))
        second.cancel()
        self.failureResultOf(second, ConnectingCancelledError)
        self.assertEqual(self.names.asked, ["api.example"])
        self.assertEqual([c.stoppedConnecting for c in self.reactor.connectors], [True, True])

    def test_several_checked_addresses_are_tried_in_turn_cached_or_not(self) -> None:
        names = ScriptedNames({"two.example": [[PUBLIC, "93.184.216.35"]]}).install(
            self, self.reactor)
        for _ in range(2):
            attempt = self.endpoint("two.example").connect(Factory.forProtocol(Protocol))
            refused = self.reactor.tcpClients[-1]
            refused[2].clientConnectionFailed(self.reactor.connectors[-1],
                                              Failure(ConnectionRefusedError()))
            self.assertEqual(self.connected_hosts()[-2:], [(PUBLIC, 443),
                                                           ("93.184.216.35", 443)])
            self.reactor.tcpClients[-1][2].buildProtocol(None).makeConnection(
                StringTransport())
            self.assertIsInstance(self.successResultOf(attempt), Protocol)
        self.assertEqual(names.asked, ["two.example"])

    def test_tls_goes_to_the_checked_address_with_the_original_host_name(self) -> None:
        factory = GuardedEndpointFactory(self.reactor, STRICT, vetter=self.vetter)
        endpoint = factory.endpointForURI(URI.fromBytes(b"https://api.example/v1/models"))
        endpoint.connect(Factory.forProtocol(Protocol))
        self.assertEqual(self.connected_hosts(), [(PUBLIC, 443)])
        tls = self.reactor.tcpClients[0][2].buildProtocol(None)
        transport = StringTransport()
        tls.makeConnection(transport)
        self.assertIn(b"api.example", transport.value())  # the ClientHello's SNI
        refused = factory.endpointForURI(URI.fromBytes(b"https://loop.example/"))
        self.failureResultOf(refused.connect(Factory.forProtocol(Protocol)), AddressRefused)

    def test_live_policy_numbers_change_with_the_settings(self) -> None:
        settings = Settings({})
        live = LivePolicy(settings)
        first, policy = live.current()
        self.assertEqual(policy, STRICT)
        self.assertEqual(live.current()[0], first)
        settings.replace({"ssrf_allow_private_networks": "true"})
        second, policy = live.current()
        self.assertNotEqual(second, first)
        self.assertTrue(policy.allow_private)
        settings.replace({})
        self.assertEqual(live.current()[0], first)
