"""The link reads common-case frames itself and leaves the rest to autobahn (``frames``,
``DeviceLink.dataReceived``): raw bytes written by a real client on loopback, so each case is
exactly the reads the server gets -- and each is handled as autobahn handled it before."""

from __future__ import annotations

from autobahn.websocket.protocol import WebSocketProtocol
from twisted.internet import reactor
from twisted.internet.task import deferLater

from gateway.store import devices as device_store
from tests.gateway.links.link_case import LinkTestCase
from tests.support.link_client import LinkClient
from tests.support.ws_frames import client_frame

HEARTBEAT = b'{"type":"heartbeat"}'


class FastPathTests(LinkTestCase):
    async def linked(self, username: str = "alice") -> tuple[LinkClient, str]:
        _, token, device = await self.user_with_device(username)
        return await self.link(token), device["id"]

    def forget_close_timers(self) -> None:
        """A link the server failed (1002, 1007) leaves autobahn's batched close-handshake
        timer bucket in the reactor after the socket closed (its entry was cancelled; the
        bucket's own call stays): not ours to wait 5 s for."""
        for call in reactor.getDelayedCalls():
            if type(getattr(call.func, "__self__", None)).__name__ == "_BatchedTimer":
                call.cancel()

    async def test_two_frames_in_one_read_are_both_handled_in_order(self) -> None:
        client, device_id = await self.linked()
        client.transport.write(client_frame(HEARTBEAT) + client_frame(
            b'{"type":"heartbeat","hostname":"renamed-box"}'))
        assert (await client.next())["type"] == "heartbeat_ack"
        assert (await client.next())["type"] == "heartbeat_ack"
        row = await self.app.db.transaction(device_store.get, device_id)
        assert row is not None and row.hostname == "renamed-box"

    async def test_a_frame_split_across_reads_is_put_together(self) -> None:
        client, _ = await self.linked()
        whole = client_frame(HEARTBEAT)
        # a complete frame followed by the first bytes of the next, then the rest
        client.transport.write(whole + whole[:5])
        assert (await client.next())["type"] == "heartbeat_ack"
        await deferLater(reactor, 0.05, lambda: None)
        client.transport.write(whole[5:] + whole)
        for _ in range(2):
            assert (await client.next())["type"] == "heartbeat_ack"

    async def test_a_fragmented_message_is_one_message(self) -> None:
        client, _ = await self.linked()
        client.transport.write(client_frame(HEARTBEAT[:7], first=0x01)
                               + client_frame(HEARTBEAT[7:], first=0x80))
        assert (await client.next())["type"] == "heartbeat_ack"
        # still usable afterwards
        client.transport.write(client_frame(HEARTBEAT))
        assert (await client.next())["type"] == "heartbeat_ack"

    async def test_a_whole_frame_inside_a_fragmented_message_is_a_protocol_error(self) -> None:
        client, _ = await self.linked()
        client.transport.write(client_frame(HEARTBEAT[:7], first=0x01))
        await deferLater(reactor, 0.05, lambda: None)
        client.transport.write(client_frame(HEARTBEAT))
        assert await client.close_code() == WebSocketProtocol.CLOSE_STATUS_CODE_PROTOCOL_ERROR
        self.forget_close_timers()

    async def test_invalid_utf8_closes_1007(self) -> None:
        client, _ = await self.linked()
        client.transport.write(client_frame(b'{"type":"heartbeat","x":"\xc0\xaf"}'))
        assert await client.close_code() == WebSocketProtocol.CLOSE_STATUS_CODE_INVALID_PAYLOAD
        self.forget_close_timers()

    async def test_unmasked_and_non_minimal_frames_are_protocol_errors(self) -> None:
        client, _ = await self.linked()
        client.transport.write(bytes((0x81, len(HEARTBEAT))) + HEARTBEAT)
        assert await client.close_code() == WebSocketProtocol.CLOSE_STATUS_CODE_PROTOCOL_ERROR
        other, _ = await self.linked("bob")
        other.transport.write(client_frame(
            HEARTBEAT, length=bytes((0x80 | 126,)) + len(HEARTBEAT).to_bytes(2, "big")))
        assert await other.close_code() == WebSocketProtocol.CLOSE_STATUS_CODE_PROTOCOL_ERROR
        self.forget_close_timers()

    async def test_binary_frames_and_bad_json_get_errors_and_keep_the_link(self) -> None:
        client, _ = await self.linked()
        client.transport.write(client_frame(HEARTBEAT, first=0x82)
                               + client_frame(b"{nope") + client_frame(HEARTBEAT))
        assert (await client.next())["error"] == "frames must be UTF-8 JSON text"
        assert (await client.next())["error"].startswith("invalid JSON")
        assert (await client.next())["type"] == "heartbeat_ack"

    async def test_large_frames_and_pings_still_go_through_autobahn(self) -> None:
        client, device_id = await self.linked()
        pongs: list[bytes] = []
        client.onPong = pongs.append  # type: ignore[method-assign]
        big = b'{"type":"heartbeat","hostname":"big-box","pad":"' + b"a" * 70_000 + b'"}'
        client.transport.write(client_frame(b"hi", first=0x89) + client_frame(big)
                               + client_frame(HEARTBEAT))
        assert (await client.next())["type"] == "heartbeat_ack"
        assert (await client.next())["type"] == "heartbeat_ack"
        assert pongs == [b"hi"]
        row = await self.app.db.transaction(device_store.get, device_id)
        assert row is not None and row.hostname == "big-box"
