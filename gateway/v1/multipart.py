"""multipart/form-data: parse a client upload and rebuild it with fields changed (pure).

Needed to replace ``model`` with the upstream model name on transcription and image-edit
uploads while keeping every file part (name, filename, content type, bytes) intact.  Parsing
uses the standard library's MIME parser; no part is decoded or re-encoded beyond that.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from email.parser import BytesParser
from email.policy import HTTP


class MultipartError(ValueError):
    pass


@dataclass(frozen=True)
class Part:
    name: str
    data: bytes
    filename: str | None = None
    content_type: str | None = None

    @property
    def is_file(self) -> bool:
        return self.filename is not None


def parse(content_type: bytes, body: bytes) -> list[Part]:
    if b"multipart/form-data" not in content_type.lower():
        raise MultipartError("expected a multipart/form-data body")
    head = b"Content-Type: " + content_type + b"\r\nMIME-Version: 1.0\r\n\r\n"
    message = BytesParser(policy=HTTP).parsebytes(head + body)
    if not message.is_multipart():
        raise MultipartError("malformed multipart body")
    parts: list[Part] = []
    for item in message.iter_parts():
        disposition = item.get("content-disposition", "")
        if not disposition.startswith("form-data"):
            continue
        name = item.get_param("name", header="content-disposition")
        if not isinstance(name, str):
            continue
        filename = item.get_filename()
        payload = item.get_payload(decode=True)
        data = payload if isinstance(payload, bytes) else b""
        parts.append(Part(name, data, filename,
                          item.get_content_type() if filename is not None else None))
    return parts


def field(parts: list[Part], name: str) -> str | None:
    for part in parts:
        if part.name == name and not part.is_file:
            return part.data.decode("utf-8", "replace")
    return None


def build(parts: list[Part]) -> tuple[bytes, bytes]:
    """(content type header value, body) for ``parts``."""
    boundary = secrets.token_hex(16).encode()
    chunks: list[bytes] = []
    for part in parts:
        disposition = b'form-data; name="' + _quote(part.name) + b'"'
        if part.filename is not None:
            disposition += b'; filename="' + _quote(part.filename) + b'"'
        chunks.append(b"--" + boundary + b"\r\nContent-Disposition: " + disposition + b"\r\n")
        if part.filename is not None:
            chunks.append(b"Content-Type: " + (part.content_type or
                                                 "application/octet-stream").encode() + b"\r\n")
        chunks.append(b"\r\n" + part.data + b"\r\n")
    chunks.append(b"--" + boundary + b"--\r\n")
    return b"multipart/form-data; boundary=" + boundary, b"".join(chunks)


def _quote(text: str) -> bytes:
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("\r", " ").replace(
        "\n", " ").encode("utf-8")
