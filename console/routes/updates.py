"""``GET /api/updates`` and ``POST /api/updates/check`` (admin): is a newer release out? (§5.15)

The build version is ``BUILD_VERSION`` (``dev`` for a local build; a release build rewrites the
constant).  The release feed is the setting ``auto_update_release_url``: a JSON document that is
either a release object (``tag_name`` or ``version``) or an array of them (the first release
that is neither a draft nor a prerelease wins) -- the shape of the common release APIs.

A check fetches the feed now, through the SSRF URL policy (``gateway.net_policy``), with a
deadline on the injected clock covering connect, headers and body, and a
size cap (``gateway.sync.fetch``), and records ``latest_version``,
``last_checked_at`` and ``last_error`` as internal settings (so every node shows the same
status).  No feed, an unreachable feed or a malformed one answers 502 ``{"error", "status"}``,
never 500.  Applying updates and restarting are not offered.
"""

from __future__ import annotations

import platform
import re
from typing import Any

import orjson

from console.context import ConsoleContext
from console.http import ApiError, json_route, make_app
from console.user_view import timestamp
from gateway.channels.net_policy import UnsafeUrl, UrlPolicy, check_url
from gateway.sync.fetch import FetchError, fetch

#: the version of this build; ``dev`` marks a local (unreleased) build
BUILD_VERSION = "dev"
FEED_TIMEOUT_SECONDS = 15.0
FEED_BODY_LIMIT = 1 << 20
USER_AGENT = "Lockgate-updater"
SUPPORTED_PLATFORMS = frozenset(f"{system}-{arch}" for system in ("linux", "darwin", "windows")
                                for arch in ("amd64", "arm64"))
_SEMVER = re.compile(r"^v?(\d+)\.(\d+)\.(\d+)(?:[-+][0-9A-Za-z.+-]*)?$")
_ARCH = {"x86_64": "amd64", "amd64": "amd64", "aarch64": "arm64", "arm64": "arm64"}


class FeedError(Exception):
    """The release feed could not be read or understood; the message says why."""


def current_platform() -> str:
    machine = platform.machine().lower()
    return f"{platform.system().lower()}-{_ARCH.get(machine, machine)}"


def semver(text: str) -> tuple[int, int, int] | None:
    match = _SEMVER.match(text.strip())
    if match is None:
        return None
    return int(match.group(1)), int(match.group(2)), int(match.group(3))


def latest_from_feed(body: bytes) -> str:
    """The newest release version named by a feed document; raises FeedError."""
    try:
        document = orjson.loads(body)
    except orjson.JSONDecodeError:
        raise FeedError("release feed is not valid JSON") from None
    releases = document if isinstance(document, list) else [document]
    for release in releases:
        if not isinstance(release, dict):
            raise FeedError("release feed entries must be objects")
        if release.get("draft") is True or release.get("prerelease") is True:
            continue
        version = release.get("tag_name", release.get("version"))
        if not isinstance(version, str) or not version.strip():
            raise FeedError("release feed entry has no tag_name or version")
        if len(version) > 100:
            raise FeedError("release feed version is too long")
        return version.strip()
    raise FeedError("release feed lists no release")


def update_status(ctx: ConsoleContext) -> dict[str, Any]:
    settings = ctx.settings
    latest = settings.text("auto_update_latest_version")
    current, newest = semver(BUILD_VERSION), semver(latest)
    plat = current_platform()
    return {
        "enabled": settings.flag("auto_update_enabled"),
        "interval_hours": settings.text("auto_update_interval_hours"),
        "current_version": BUILD_VERSION,
        "latest_version": latest,
        "update_available": bool(current and newest and newest > current),
        "platform": plat,
        "supported": plat in SUPPORTED_PLATFORMS and current is not None,
        "last_checked_at": settings.text("auto_update_last_checked_at"),
        "last_error": settings.text("auto_update_last_error"),
        "in_progress": False,
        "phase": "",
        "progress": 0,
        "downloaded_bytes": 0,
        "total_bytes": 0,
        "message": "",
    }


async def fetch_latest(ctx: ConsoleContext, url: str) -> str:
    """GET the feed and return the newest version; raises FeedError."""
    try:
        fetched = await fetch(ctx.reactor, ctx.clock, url, timeout=FEED_TIMEOUT_SECONDS,
                              limit=FEED_BODY_LIMIT,
                              headers={"user-agent": USER_AGENT,
                                       "accept": "application/json"},
                              policy=UrlPolicy.from_settings(ctx.settings))
    except FetchError as exc:
        raise FeedError(f"release feed is unreachable: {exc}") from None
    if fetched.status != 200:
        raise FeedError(f"release feed answered HTTP {fetched.status}")
    return latest_from_feed(fetched.body)


class UpdateRoutes:
    app = make_app()

    def __init__(self, ctx: ConsoleContext) -> None:
        self.ctx = ctx

    @app.route("/", methods=["GET"])
    @json_route
    async def show(self, request: Any) -> dict[str, Any]:
        await self.ctx.sessions.admin(request)
        return update_status(self.ctx)

    @app.route("/check", methods=["POST"])
    @json_route
    async def check(self, request: Any) -> dict[str, Any]:
        await self.ctx.sessions.admin(request)
        url = self.ctx.settings.text("auto_update_release_url").strip()
        rows = {"auto_update_last_checked_at": timestamp(self.ctx.now()) or ""}
        error = ""
        try:
            if not url:
                raise FeedError("no release feed is configured (auto_update_release_url)")
            try:
                url = check_url(url, UrlPolicy.from_settings(self.ctx.settings))
            except UnsafeUrl as exc:
                raise FeedError(f"release feed URL is not allowed: {exc}") from None
            rows["auto_update_latest_version"] = await fetch_latest(self.ctx, url)
        except FeedError as exc:
            error = str(exc)
        rows["auto_update_last_error"] = error
        await self.ctx.live_settings.save(rows, self.ctx.now())
        status = update_status(self.ctx)
        if error:
            raise ApiError(502, error, extra={"status": status})
        return status
