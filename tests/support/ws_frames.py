"""Client (device-to-server) WebSocket frames built byte by byte, for tests that write raw
frames on a link (RFC 6455 §5.2; masking with a plain loop, independent of the code tested)."""

from __future__ import annotations

MASK = b"\x37\xfa\x21\x3d"


def client_frame(payload: bytes, *, first: int = 0x81, mask: bytes = MASK,
                 length: bytes | None = None) -> bytes:
    """A masked frame: ``first`` is the FIN/RSV/opcode byte (default: final text frame);
    ``length`` overrides the length bytes (mask bit included) to build malformed frames."""
    masked = bytes(byte ^ mask[index % 4] for index, byte in enumerate(payload))
    if length is None:
        size = len(payload)
        if size <= 125:
            length = bytes((0x80 | size,))
        elif size <= 0xFFFF:
            length = bytes((0x80 | 126,)) + size.to_bytes(2, "big")
        else:
            length = bytes((0x80 | 127,)) + size.to_bytes(8, "big")
    return bytes((first,)) + length + mask + masked
