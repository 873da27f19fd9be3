"""WebSocket frames of a link's common case, read and written without autobahn's per-frame
machinery (RFC 6455 §5.2).

Why: an idle device sends one ``heartbeat`` every 20 s and gets one ``heartbeat_ack``; at 2,000
links that is 100 frames in and 100 out every second.  Autobahn takes each frame through a
dozen Python calls (header parse, a masker object, a UTF-8 validator, begin/data/end hooks for
frame and message, a message signal with its own Deferred) and each sent message through as
many; that was most of an idle node's CPU.  A device's frames are nearly always one small
complete text frame per read, so the link reads exactly that shape here and leaves everything
else -- a partial, fragmented, control, binary, compressed, oversized or non-UTF-8 frame -- to
autobahn, untouched, so that its handling (and its close codes) stay exactly as they were.

Pure functions on bytes: no Twisted, no autobahn.
"""

from __future__ import annotations

#: FIN + opcode 1 (text), no RSV bits
_FIN_TEXT = 0x81
_MASKED = 0x80
#: payload lengths up to this take the one-byte length; up to ``EXTENDED_16`` the 16-bit one
SHORT_LENGTH = 125
EXTENDED_16 = 0xFFFF
#: the largest payload read here (the 16-bit length form); larger frames go to autobahn
MAX_FAST_PAYLOAD = EXTENDED_16


def unmask(mask: bytes, payload: bytes) -> bytes:
    """``payload`` XOR the repeated 4-byte ``mask`` (one big-integer XOR: no Python loop)."""
    size = len(payload)
    if not size:
        return b""
    key = (mask * (size // 4 + 1))[:size]
    return (int.from_bytes(payload, "little") ^ int.from_bytes(key, "little")).to_bytes(
        size, "little")


def read_text_frame(data: bytes, start: int = 0) -> tuple[bytes, int] | None:
    """The client text frame that begins at ``data[start]``, when it is the common case: FIN,
    no RSV bits, opcode text, masked, payload of at most ``MAX_FAST_PAYLOAD`` bytes in minimal
    length encoding, wholly inside ``data``, and valid UTF-8.  Returns ``(payload, end)``
    (the unmasked payload; ``end``: the offset just after the frame), or ``None`` for anything
    else -- which the caller hands, with everything after it, to the general parser."""
    if len(data) - start < 6 or data[start] != _FIN_TEXT:
        return None
    second = data[start + 1]
    if not second & _MASKED:
        return None
    length = second & 0x7F
    head = start + 2
    if length == 126:
        if len(data) - start < 8:
            return None
        length = int.from_bytes(data[head:head + 2], "big")
        if length <= SHORT_LENGTH:
            # not the minimal encoding: a protocol violation, autobahn's to report
            return None
        head += 2
    elif length == 127:
        return None
    end = head + 4 + length
    if end > len(data):
        return None
    payload = unmask(data[head:head + 4], data[head + 4:end])
    try:
        payload.decode("utf-8")
    except UnicodeDecodeError:
        return None
    return payload, end


def text_frame(payload: bytes) -> bytes:
    """One unfragmented, unmasked (server-to-client) text frame carrying ``payload``."""
    size = len(payload)
    if size <= SHORT_LENGTH:
        return bytes((_FIN_TEXT, size)) + payload
    if size <= EXTENDED_16:
        return bytes((_FIN_TEXT, 126)) + size.to_bytes(2, "big") + payload
    return bytes((_FIN_TEXT, 127)) + size.to_bytes(8, "big") + payload
