"""The link's own reading and writing of common-case WebSocket frames (``gateway.links.frames``):
exactly RFC 6455 §5.2 for the shapes it takes, ``None`` for every shape it leaves to autobahn."""

from __future__ import annotations

from twisted.trial.unittest import TestCase

from gateway.links.frames import read_text_frame, text_frame, unmask
from tests.support.ws_frames import MASK, client_frame


class ReadTests(TestCase):
    def test_a_small_text_frame_is_read_and_unmasked(self) -> None:
        payload = b'{"type":"heartbeat"}'
        data = client_frame(payload)
        assert read_text_frame(data) == (payload, len(data))

    def test_lengths_at_the_edges_of_each_encoding(self) -> None:
        for size in (0, 1, 3, 4, 5, 125, 126, 127, 1000, 0xFFFF):
            payload = bytes(ord("a") + index % 26 for index in range(size))
            data = client_frame(payload)
            assert read_text_frame(data) == (payload, len(data)), size

    def test_frames_one_after_another_in_one_read(self) -> None:
        first, second = b'{"type":"heartbeat"}', ("é" * 200).encode()
        data = client_frame(first) + client_frame(second) + client_frame(b"x")[:3]
        payload, end = read_text_frame(data) or (b"", 0)
        assert payload == first
        payload, end = read_text_frame(data, end) or (b"", 0)
        assert payload == second
        assert read_text_frame(data, end) is None  # the partial third frame

    def test_every_other_shape_is_left_to_the_general_parser(self) -> None:
        payload = b'{"type":"heartbeat"}'
        whole = client_frame(payload)
        unmasked = bytes((0x81, len(payload))) + payload
        cases = {
            "partial header": whole[:4],
            "partial payload": whole[:-1],
            "not final (fragmented)": client_frame(payload, first=0x01),
            "continuation": client_frame(payload, first=0x80),
            "binary": client_frame(payload, first=0x82),
            "ping": client_frame(b"", first=0x89),
            "close": client_frame(b"\x03\xe8", first=0x88),
            "RSV1 (compressed)": client_frame(payload, first=0xC1),
            "RSV3": client_frame(payload, first=0x91),
            "unmasked": unmasked,
            "64-bit length": client_frame(b"a" * 0x10000),
            "non-minimal 16-bit length": client_frame(
                payload, length=bytes((0x80 | 126,)) + len(payload).to_bytes(2, "big")),
            "invalid UTF-8": client_frame(b'{"type":"\xff"}'),
            "UTF-8 surrogate": client_frame(b"\xed\xa0\x80"),
            "overlong UTF-8": client_frame(b"\xc0\xaf"),
            "UTF-8 ending inside a code point": client_frame(b"ok \xe2\x82"),
        }
        for name, data in cases.items():
            assert read_text_frame(data) is None, name


class WriteTests(TestCase):
    def test_server_frames_are_unmasked_final_text_frames(self) -> None:
        assert text_frame(b"") == b"\x81\x00"
        assert text_frame(b"a" * 125) == b"\x81\x7d" + b"a" * 125
        assert text_frame(b"a" * 126) == b"\x81\x7e\x00\x7e" + b"a" * 126
        assert text_frame(b"a" * 0xFFFF) == b"\x81\x7e\xff\xff" + b"a" * 0xFFFF
        assert text_frame(b"a" * 0x10000) == (
            b"\x81\x7f\x00\x00\x00\x00\x00\x01\x00\x00" + b"a" * 0x10000)

    def test_unmask_is_its_own_inverse(self) -> None:
        payload = bytes(range(256)) * 3
        assert unmask(MASK, unmask(MASK, payload)) == payload
        assert unmask(MASK, payload) == client_frame(payload)[8:]
        assert unmask(MASK, b"") == b""
