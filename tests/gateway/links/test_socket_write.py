"""``socket_write.write_now`` on real loopback TCP connections: an idle transport sends at once
(nothing buffered, the reactor not asked to watch for room); anything buffered, closing or not
plain TCP goes through Twisted's ``write`` so order and error handling stay Twisted's."""

from __future__ import annotations

from typing import Any

from twisted.internet import protocol, reactor
from twisted.internet.defer import Deferred
from twisted.internet.task import deferLater
from twisted.internet.testing import StringTransport
from twisted.trial.unittest import TestCase

from gateway.links.socket_write import write_now


class Collector(protocol.Protocol):
    def __init__(self) -> None:
        self.received = b""

    def dataReceived(self, data: bytes) -> None:
        self.received += data


class WriteNowTests(TestCase):
    async def connected(self) -> tuple[Any, Collector]:
        """(the server side's transport, the client collecting what it receives)"""
        accepted: Deferred[Any] = Deferred()

        class Accepted(protocol.Protocol):
            def connectionMade(self) -> None:
                accepted.callback(self.transport)

        port = reactor.listenTCP(0, protocol.Factory.forProtocol(Accepted),
                                 interface="127.0.0.1")
        self.addCleanup(port.stopListening)
        client = Collector()
        await protocol.ClientCreator(reactor, lambda: client).connectTCP(
            "127.0.0.1", port.getHost().port)
        self.addCleanup(client.transport.loseConnection)
        server = await accepted
        self.addCleanup(server.abortConnection)
        return server, client

    async def received(self, client: Collector, expected: bytes) -> None:
        for _ in range(500):
            if len(client.received) >= len(expected):
                break
            await deferLater(reactor, 0.01, lambda: None)
        assert client.received == expected

    async def test_an_idle_transport_sends_at_once(self) -> None:
        server, client = await self.connected()
        write_now(server, b"\x81\x05hello")
        assert server.dataBuffer == b"" and server._tempDataBuffer == []
        assert server not in reactor.getWriters(), "no write watch, no extra loop pass"
        await self.received(client, b"\x81\x05hello")

    async def test_a_connecting_sides_transport_sends_at_once_too(self) -> None:
        # the lean upstream client's requests go out on tcp.Client transports
        server, client = await self.connected()
        received = Collector()
        server.protocol.dataReceived = received.dataReceived
        write_now(client.transport, b"POST / HTTP/1.1\r\n\r\n")
        transport: Any = client.transport
        assert transport.dataBuffer == b"" and transport._tempDataBuffer == []
        assert transport not in reactor.getWriters(), "no write watch, no extra loop pass"
        await self.received(received, b"POST / HTTP/1.1\r\n\r\n")

    async def test_buffered_bytes_are_never_overtaken(self) -> None:
        server, client = await self.connected()
        server.write(b"first,")
        write_now(server, b"second")
        assert server._tempDataBuffer == [b"first,", b"second"]
        await self.received(client, b"first,second")

    async def test_a_closing_transport_is_left_to_twisted(self) -> None:
        server, client = await self.connected()
        server.write(b"last")
        server.loseConnection()
        write_now(server, b"after close")
        await self.received(client, b"lastafter close")  # as Twisted: sent, then closed

    def test_other_transports_get_a_plain_write(self) -> None:
        transport = StringTransport()
        write_now(transport, b"frame")
        assert transport.value() == b"frame"
