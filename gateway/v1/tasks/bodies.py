"""Upstream request bodies and paths per channel type for task submissions (contract §13.4-5).

Pure.  ``compat-video`` channels take the client body with ``model`` swapped; ``imgvideo``
channels take a mapped body (``model_name``, ``image``, ``aspect_ratio``, ``num_videos``,
``duration`` as a string).  The status path of a task is fixed here at submission and stored,
so a poll never has to guess the family again.  The artjob and clipgen2 upstream path prefixes
are settings (contract §0: real providers use their own), passed in by the caller.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from gateway.channels.channel_types import ARTJOB, COMPAT_VIDEO, IMGVIDEO

VIDEO_TYPES = (COMPAT_VIDEO, IMGVIDEO)
ARTJOB_TYPES = (ARTJOB,)
#: the client-facing path prefixes (also the default upstream ones)
ARTJOB_PREFIX = "/v1/artjob"
CLIPGEN2_PREFIX = "/v1/clipgen2"
ARTJOB_STATUS = ARTJOB_PREFIX + "/"
#: the 14 artjob actions of gateway contract §14 (besides ``generations`` and ``imagine``)
ARTJOB_ACTIONS = frozenset({
    "blend", "describe", "edits", "high-variation", "inpaint", "low-variation", "modal", "pan",
    "reroll", "upscale", "variation", "video", "zoom", "remix"})
_RATIOS = frozenset({"16:9", "9:16", "1:1", "4:3", "3:4", "21:9"})
_NAMED_RATIOS = {"landscape": "16:9", "portrait": "9:16", "square": "1:1"}
IMGVIDEO_PATH = "/v1/videos/image2video"


def _aspect_ratio(value: Any) -> str | None:
    if not isinstance(value, str):
        return None
    text = value.strip()
    lowered = text.lower()
    if not text or lowered == "auto":
        return None
    if text in _RATIOS:
        return text
    if lowered in _NAMED_RATIOS:
        return _NAMED_RATIOS[lowered]
    return lowered if ":" in text else text


def imgvideo_body(body: dict[str, Any], upstream_model: str) -> dict[str, Any]:
    """The image-to-video provider's body (§13.4)."""
    out = {k: v for k, v in body.items() if k not in ("model", "model_name", "modelName")}
    out["model_name"] = upstream_model
    for name in ("image_url", "first_frame_image", "firstFrameImage"):
        out.pop(name, None)
    image = next((body[n] for n in ("image", "image_url", "first_frame_image",
                                    "firstFrameImage") if body.get(n)), None)
    if image is not None:
        out["image"] = image
    size = out.pop("size", None)
    resolution = out.pop("resolution", None)
    if "aspect_ratio" not in out:
        ratio = _aspect_ratio(size) or _aspect_ratio(resolution)
        if ratio is not None:
            out["aspect_ratio"] = ratio
    if "n" in out:
        n = out.pop("n")
        out.setdefault("num_videos", n)
    if "duration" not in out:
        for name in ("duration_seconds", "seconds", "video_duration"):
            if body.get(name) is not None:
                out["duration"] = str(body[name]).strip().removesuffix("s")
                break
    for name in ("duration_seconds", "seconds", "video_duration"):
        out.pop(name, None)
    return out


def segment(upstream_id: str) -> str:
    return quote(upstream_id, safe="")


def video_family(channel_type: str, body: dict[str, Any],
                 upstream_model: str) -> tuple[str, dict[str, Any], str]:
    """(create path, upstream body, status path prefix) of the video task family."""
    if channel_type == IMGVIDEO:
        return IMGVIDEO_PATH, imgvideo_body(body, upstream_model), IMGVIDEO_PATH + "/"
    return ("/v1/video/generations", {**body, "model": upstream_model},
            "/v1/video/generations/")


def rebase(path: str, client_prefix: str, upstream_prefix: str) -> str:
    """``path`` with its ``client_prefix`` swapped for ``upstream_prefix`` (else unchanged)."""
    if path.startswith(client_prefix + "/"):
        return upstream_prefix + path[len(client_prefix):]
    return path


def compat_video(channel_type: str, path: str, body: dict[str, Any], upstream_model: str,
                 clipgen2_prefix: str = CLIPGEN2_PREFIX) -> tuple[str, dict[str, Any], str]:
    """(create path, upstream body, status path prefix) of a compatible video-kind task."""
    if channel_type == IMGVIDEO:
        return IMGVIDEO_PATH, imgvideo_body(body, upstream_model), IMGVIDEO_PATH + "/"
    return (rebase(path, CLIPGEN2_PREFIX, clipgen2_prefix), {**body, "model": upstream_model},
            "/v1/tasks/")


def artjob(path: str, body: dict[str, Any], upstream_model: str,
           prefix: str = ARTJOB_PREFIX) -> tuple[str, dict[str, Any], str]:
    """(create path, upstream body, status path prefix) of an artjob task: the client's path
    under the configured upstream ``prefix``, polled at ``<prefix>/<upstream id>``."""
    return rebase(path, ARTJOB_PREFIX, prefix), {**body, "model": upstream_model}, prefix + "/"
