"""``POST /v1/uploads/images``: an image upload turned into a data URL (contract §12.1).

Stores nothing, calls no upstream and bills nothing -- but still requires a caller and counts
against the global rate limit like every /v1 route.  The type is sniffed from the bytes (or,
failing that, taken from the filename extension), never trusted from the client's header.
"""

from __future__ import annotations

import base64
from typing import Any

import orjson

from gateway import errors
from gateway.auth import authenticate
from gateway.context import GatewayContext
from gateway.limits import global_identity
from gateway.v1.multipart import MultipartError, parse
from gateway.v1.request_io import read_body

MAX_IMAGE_BYTES = 20 * 1024 * 1024
_SIGNATURES = (
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
)
_EXTENSIONS = {".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".png": "image/png",
               ".gif": "image/gif", ".webp": "image/webp"}


def sniff(data: bytes) -> str | None:
    for signature, content_type in _SIGNATURES:
        if data.startswith(signature):
            return content_type
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return None


def _by_extension(filename: str) -> str | None:
    dot = filename.rfind(".")
    return _EXTENSIONS.get(filename[dot:].lower()) if dot >= 0 else None


async def upload_image(ctx: GatewayContext, request: Any) -> bytes:
    if not ctx.settings.flag("token_api_enabled"):
        raise errors.gateway_disabled()
    caller = await authenticate(ctx, request)
    verdict = await ctx.limiter.check_global(
        global_identity(caller.key_id, caller.user.id, caller.ip))
    if verdict.error is not None:
        raise verdict.error
    body = read_body(request, MAX_IMAGE_BYTES + (1 << 20))
    try:
        parts = parse(request.getHeader(b"content-type") or b"", body)
    except MultipartError as exc:
        raise errors.invalid_request(f"missing or invalid file field: {exc}", "file") from None
    upload = next((p for p in parts if p.name == "file" and p.is_file), None)
    if upload is None:
        raise errors.invalid_request("missing or invalid file field: file is required", "file")
    size = len(upload.data)
    if size > MAX_IMAGE_BYTES:
        raise errors.file_too_large(size, MAX_IMAGE_BYTES)
    content_type = sniff(upload.data) or _by_extension(upload.filename or "")
    if content_type is None:
        raise errors.invalid_request(
            f"unsupported image type: {upload.content_type or 'unknown'}, "
            "allowed: jpeg, png, gif, webp", "file")
    encoded = base64.b64encode(upload.data).decode("ascii")
    return orjson.dumps({
        "url": f"data:{content_type};base64,{encoded}", "filename": upload.filename or "",
        "content_type": content_type, "bytes": size, "created_at": int(ctx.clock.seconds())})
