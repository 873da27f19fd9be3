"""The SSE parser: every line-ending style, any chunking, comments, caps; the encoders."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from twisted.trial.unittest import SynchronousTestCase

from gateway.protocols.sse import (
    DONE,
    PING,
    SSEEvent,
    SSEParser,
    SSETooLarge,
    comment,
    encode_event,
)


def parse_all(chunks: list[bytes], **kwargs: int) -> list[SSEEvent]:
    parser = SSEParser(**kwargs)
    events: list[SSEEvent] = []
    for chunk in chunks:
        events.extend(parser.feed(chunk))
    return events


def split_at(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts})
    pieces, start = [], 0
    for point in points:
        pieces.append(data[start:point])
        start = point
    pieces.append(data[start:])
    return pieces


class ParserTests(SynchronousTestCase):
    def test_fields_and_multiline_data(self) -> None:
        stream = (b"event: delta\nid: 7\nretry: 3000\ndata: one\ndata:two\ndata\n\n"
                  b"data: {\"a\": 1}\n\n")
        assert parse_all([stream]) == [
            SSEEvent(b"one\ntwo\n", "delta", "7", 3000),
            SSEEvent(b'{"a": 1}', None, "7", None),
        ]

    def test_only_one_leading_space_is_stripped(self) -> None:
        assert parse_all([b"data:  two spaces\n\n"]) == [SSEEvent(b" two spaces")]

    def test_comments_and_unknown_fields_are_ignored(self) -> None:
        stream = b": ping\n\n:\nfoo: bar\ndata: x\n: mid\n\n"
        assert parse_all([stream]) == [SSEEvent(b"x")]

    def test_event_without_data_is_not_dispatched_and_does_not_leak_its_type(self) -> None:
        assert parse_all([b"event: lonely\n\ndata: y\n\n"]) == [SSEEvent(b"y")]

    def test_crlf_and_bare_cr_line_endings(self) -> None:
        expected = [SSEEvent(b"a", "e"), SSEEvent(b"b")]
        assert parse_all([b"event: e\r\ndata: a\r\n\r\ndata: b\r\n\r\n"]) == expected
        assert parse_all([b"event: e\rdata: a\r\rdata: b\r\r"]) == expected

    def test_crlf_split_between_chunks_is_one_line_ending(self) -> None:
        assert parse_all([b"data: a\r", b"\n", b"\r", b"\ndata: b\r\n\r\n"]) == [
            SSEEvent(b"a"), SSEEvent(b"b")]

    def test_bare_cr_at_chunk_end_dispatches_without_waiting(self) -> None:
        parser = SSEParser()
        assert parser.feed(b"data: a\r") == []
        assert parser.feed(b"\r") == [SSEEvent(b"a")]

    def test_bom_is_skipped_even_when_split(self) -> None:
        assert parse_all([b"\xef\xbb", b"\xbfdata: x\n\n"]) == [SSEEvent(b"x")]
        assert parse_all([b"\xef\xbb\xbfdata: x\n\n"]) == [SSEEvent(b"x")]

    def test_incomplete_event_is_held(self) -> None:
        parser = SSEParser()
        assert parser.feed(b"data: par") == []
        assert parser.buffered == len(b"data: par")
        assert parser.feed(b"tial\n") == []
        assert parser.feed(b"\n") == [SSEEvent(b"partial")]
        assert parser.buffered == 0

    def test_unterminated_line_over_cap_raises(self) -> None:
        parser = SSEParser(max_event_bytes=100)
        parser.feed(b"data: " + b"x" * 90)
        with self.assertRaises(SSETooLarge):
            parser.feed(b"x" * 20)

    def test_event_over_cap_across_many_lines_raises(self) -> None:
        parser = SSEParser(max_event_bytes=100)
        with self.assertRaises(SSETooLarge):
            for _ in range(20):
                parser.feed(b"data: 0123456789\n")

    def test_the_fault_carries_the_whole_events_fed_before_it(self) -> None:
        """One read's worth of chunks is fed at once: the events it completed before a line
        or an event over the cap travel on the error, so a relay still delivers them."""
        parser = SSEParser(max_event_bytes=20)
        with self.assertRaises(SSETooLarge) as line_fault:
            parser.feed(b"data: a\n\nevent: e\ndata: b\n\ndata: " + b"x" * 30)
        assert line_fault.exception.events == [SSEEvent(b"a"), SSEEvent(b"b", "e")]
        parser = SSEParser(max_event_bytes=20)
        with self.assertRaises(SSETooLarge) as event_fault:
            parser.feed(b"data: a\n\n" + b"data: 0123456789\n" * 3)
        assert event_fault.exception.events == [SSEEvent(b"a")]
        assert list(SSETooLarge("no events").events) == []

    def test_events_under_cap_do_not_accumulate(self) -> None:
        parser = SSEParser(max_event_bytes=100)
        for _ in range(1000):
            assert parser.feed(b"data: 0123456789\n\n") == [SSEEvent(b"0123456789")]


class EncoderTests(SynchronousTestCase):
    def test_encode_simple_and_named(self) -> None:
        assert encode_event(b'{"a":1}') == b'data: {"a":1}\n\n'
        assert encode_event("x", event="message_stop") == b"event: message_stop\ndata: x\n\n"
        assert encode_event("x", id="5") == b"id: 5\ndata: x\n\n"

    def test_multiline_data_becomes_several_data_lines(self) -> None:
        assert encode_event("a\nb\r\nc") == b"data: a\ndata: b\ndata: c\n\n"

    def test_comment_and_constants(self) -> None:
        assert PING == b": ping\n\n"
        assert DONE == b"data: [DONE]\n\n"
        assert comment("a\nb") == b": a\n: b\n\n"
        assert parse_all([PING, comment("x\ny")]) == []


# hypothesis: any split of a valid stream yields the same events

_text = st.text(alphabet=st.characters(blacklist_characters="\r\n\x00",
                                       blacklist_categories=("Cs",)), max_size=30)
_event = st.tuples(_text, st.one_of(st.none(), _text.filter(lambda s: s.strip() == s and s)))
_ending = st.sampled_from([b"\n", b"\r\n", b"\r"])


@st.composite
def streams(draw: st.DrawFn) -> tuple[bytes, list[SSEEvent]]:
    events = draw(st.lists(_event, max_size=8))
    ending = draw(_ending)
    wire, expected = b"", []
    for data, name in events:
        if draw(st.booleans()):
            wire += b": keepalive" + ending
        encoded = encode_event(data, event=name)
        wire += encoded.replace(b"\n", ending)
        expected.append(SSEEvent(data.encode(), name))
    return wire, expected


class PropertyTests(SynchronousTestCase):
    @settings(max_examples=300, deadline=None)
    @given(streams(), st.lists(st.integers(min_value=0, max_value=10_000), max_size=12))
    def test_any_split_yields_the_same_events(
            self, stream: tuple[bytes, list[SSEEvent]], cuts: list[int]) -> None:
        wire, expected = stream
        assert parse_all([wire]) == expected
        assert parse_all(split_at(wire, cuts)) == expected

    @settings(max_examples=100, deadline=None)
    @given(streams())
    def test_byte_by_byte_equals_whole(self, stream: tuple[bytes, list[SSEEvent]]) -> None:
        wire, expected = stream
        assert parse_all([wire[i:i + 1] for i in range(len(wire))]) == expected

    @settings(max_examples=200, deadline=None)
    @given(st.binary(max_size=200), st.lists(st.integers(0, 300), max_size=6))
    def test_arbitrary_bytes_never_crash_and_split_invariant(
            self, wire: bytes, cuts: list[int]) -> None:
        assert parse_all(split_at(wire, cuts)) == parse_all([wire])
