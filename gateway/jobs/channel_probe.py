"""Probing upstream channels so auto-disabled ones come back by themselves (contract §5.4).

Settings: ``reliability_auto_detect_upstream_enabled`` probes every enabled channel and records
``last_health_checked_at`` / ``last_health_status`` (``up``/``down``);
``reliability_auto_recover_enabled`` probes auto-disabled channels and, when a probe succeeds
at least ``reliability_recovery_after_seconds`` after the channel was auto-disabled, clears the
auto-disable (and the failure counters) and announces ``CATALOG`` so every node routes to it
again.  Probes run every ``reliability_auto_detect_interval_seconds`` with
``reliability_auto_detect_timeout_seconds`` each, at most ``concurrency`` at once, on one node
per round (a claim in shared state).

A channel an admin disabled (``enabled`` false) is never probed and never touched: the
recovery update itself is conditional on ``enabled`` and on the ``auto_disabled_at`` the probe
saw, so an admin change racing with a probe wins.

A probe is ``GET <base_url>/v1/models`` with the channel key (to the channel's own host only),
after the URL policy; any 2xx is a success.  ``on_recovered(channel_id)`` lets the composition
root clear this node's in-memory health for the channel.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from datetime import UTC, datetime, timedelta
from typing import Any

from twisted.internet.defer import (
    Deferred,
    DeferredList,
    DeferredSemaphore,
)
from twisted.logger import Logger

from gateway.channels.net_policy import UnsafeUrl, UrlPolicy, check_url
from gateway.invalidation import CATALOG
from gateway.jobs.periodic import RoundService
from gateway.store.channel_upkeep import ProbeTarget, probe_targets, record_probe
from gateway.sync.fetch import FetchError, fetch
from gateway.sync.model_lists import COMPAT_PATH, join_url

log = Logger()

TICK_SECONDS = 10.0
CLAIM_KEY = "lockgate:channel-probe:round"
class ChannelProbe(RoundService):
    failure_message = "channel probe round failed"

    def __init__(self, reactor: Any, clock: Any, db: Any, state: Any, invalidation: Any,
                 settings: Callable[[], Any], *, concurrency: int = 4,
                 tick_seconds: float = TICK_SECONDS,
                 on_recovered: Callable[[int], object] | None = None) -> None:
        super().__init__(reactor, clock, tick_seconds)
        self._db = db
        self._state = state
        self._invalidation = invalidation
        self._settings = settings
        self._semaphore = DeferredSemaphore(max(1, concurrency))
        self._on_recovered = on_recovered
        self._last_round: float | None = None

    def now(self) -> datetime:
        return datetime.fromtimestamp(self._clock.seconds(), UTC)

    def start_round(self) -> Coroutine[Any, Any, None] | None:
        settings = self._settings()
        detect = settings.flag("reliability_auto_detect_upstream_enabled")
        recover = settings.flag("reliability_auto_recover_enabled")
        if not (detect or recover):
            return None
        interval = settings.integer("reliability_auto_detect_interval_seconds", 300)
        now = self._clock.seconds()
        if self._last_round is not None and now - self._last_round < interval:
            return None
        self._last_round = now
        return self._round(settings, detect, recover, interval)

    async def _round(self, settings: Any, detect: bool, recover: bool, interval: int) -> None:
        if not await self._state.claim(CLAIM_KEY, max(1, interval - 1)):
            return
        channels = await self._db.transaction(probe_targets, detect)
        policy = UrlPolicy.from_settings(settings)
        timeout = max(1, settings.integer("reliability_auto_detect_timeout_seconds", 10))
        after = timedelta(seconds=settings.integer("reliability_recovery_after_seconds", 1800))
        probes = [self._start(channel, policy, timeout, recover, after)
                  for channel in channels]
        results = await DeferredList(probes, consumeErrors=True)
        if any(ok and recovered for ok, recovered in results):
            await self._invalidation.announce(CATALOG)

    def _start(self, channel: ProbeTarget, policy: UrlPolicy, timeout: float,
               recover: bool, after: timedelta) -> Deferred[bool]:
        return self.track(self._semaphore.run(
            self._probe, channel, policy, timeout, recover, after))

    async def _probe(self, channel: ProbeTarget, policy: UrlPolicy, timeout: float,
                     recover: bool, after: timedelta) -> bool:
        healthy = await self.probe(channel, policy, timeout)
        now = self.now()
        disabled_at = channel.auto_disabled_at
        may_recover = (recover and healthy and disabled_at is not None
                       and now - disabled_at >= after)
        recovered: bool = await self._db.transaction(record_probe, channel, healthy,
                                                     may_recover, now)
        if recovered:
            log.info("channel {id} recovered after a successful probe", id=channel.id)
            if self._on_recovered is not None:
                self._on_recovered(channel.id)
        return recovered

    async def probe(self, channel: ProbeTarget, policy: UrlPolicy, timeout: float) -> bool:
        url = join_url(channel.base_url, COMPAT_PATH)
        try:
            check_url(url, policy)
        except UnsafeUrl:
            return False
        headers = {"accept": "application/json"}
        if channel.api_key:
            headers["authorization"] = f"Bearer {channel.api_key}"
        try:
            fetched = await fetch(self._reactor, self._clock, url, headers=headers,
                                  timeout=timeout, limit=1 << 20, policy=policy)
        except FetchError:
            return False
        return 200 <= fetched.status < 300
