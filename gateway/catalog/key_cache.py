"""API key records by key hash, read from memory on the request path.

A miss reads the database once and caches the answer -- positive answers until a KEYS
announcement drops them (detail = the key hash, or ``*`` for all), negative answers briefly so a
burst of requests with a bad key does not hammer the database.  Both maps are bounded (least
recently used entries go first).  A USERS announcement drops that user's keys (deleting a user
deletes their keys).  An epoch counter stops a read that started before an
invalidation from caching its now-stale answer.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from gateway.client_ip import Network, ip_in, parse_networks
from gateway.invalidation import KEYS, USERS, Invalidation
from gateway.store import api_keys as key_store
from gateway.store.pool import DBRunner

NEGATIVE_TTL_SECONDS = 10.0
#: positive entries are also re-read after this long, in case an announcement was lost
POSITIVE_TTL_SECONDS = 300.0


@dataclass(frozen=True)
class KeyRecord:
    id: int
    user_id: int
    name: str
    key_hash: str
    enabled: bool
    allowed_models: frozenset[str]
    #: ordered: the failover sequence of user channels (empty = unrestricted)
    allowed_user_channels: tuple[int, ...]
    allowed_ips: tuple[Network, ...]
    quota_limit_nanos: int

    def allows_ip(self, ip: str) -> bool:
        return not self.allowed_ips or ip_in(ip, self.allowed_ips)

    def allows_model(self, model_name: str) -> bool:
        """Empty list = any model; entries and the name compare without a ``models/`` prefix."""
        if not self.allowed_models:
            return True
        return _strip(model_name) in {_strip(m) for m in self.allowed_models}

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> KeyRecord:
        try:
            networks = tuple(parse_networks(row["allowed_ips"] or []))
        except ValueError:
            networks = ()
        return cls(
            id=row["id"], user_id=row["user_id"], name=row["name"], key_hash=row["key_hash"],
            enabled=bool(row["enabled"]),
            allowed_models=frozenset(row["allowed_models"] or []),
            allowed_user_channels=tuple(row["allowed_user_channels"] or []),
            allowed_ips=networks, quota_limit_nanos=row["quota_limit_nanos"],
        )


def _strip(name: str) -> str:
    name = name.strip()
    return name[len("models/"):] if name.startswith("models/") else name


class KeyCache:
    def __init__(self, db: DBRunner, clock: Any, max_entries: int = 100_000,
                 max_negative: int = 10_000) -> None:
        self._db = db
        self._clock = clock
        self._max = max_entries
        self._max_negative = max_negative
        self._found: OrderedDict[str, tuple[float, KeyRecord]] = OrderedDict()
        self._missing: OrderedDict[str, float] = OrderedDict()
        self._epoch = 0

    def listen(self, invalidation: Invalidation) -> None:
        invalidation.on(KEYS, self._on_change)
        invalidation.on(USERS, self._on_user_change)

    async def _on_change(self, detail: bytes) -> None:
        self.drop(detail.decode("ascii", "replace"))

    async def _on_user_change(self, detail: bytes) -> None:
        """A user changed or was deleted (their keys cascade): drop that user's keys."""
        text = detail.decode("ascii", "replace")
        if not text.isdigit():
            self.drop("*")
            return
        self._epoch += 1
        user_id = int(text)
        for key_hash in [h for h, (_, r) in self._found.items() if r.user_id == user_id]:
            del self._found[key_hash]

    def drop(self, key_hash: str = "*") -> None:
        self._epoch += 1
        if key_hash == "*":
            self._found.clear()
            self._missing.clear()
        else:
            self._found.pop(key_hash, None)
            self._missing.pop(key_hash, None)

    def cached(self, key_hash: str) -> KeyRecord | None:
        """The cached record without touching the database (``None`` when not cached)."""
        entry = self._found.get(key_hash)
        if entry is None or entry[0] <= self._clock.seconds():
            return None
        return entry[1]

    async def lookup(self, key_hash: str) -> KeyRecord | None:
        """The key's record (disabled keys included: callers treat them as unknown)."""
        now = self._clock.seconds()
        entry = self._found.get(key_hash)
        if entry is not None:
            if entry[0] > now:
                self._found.move_to_end(key_hash)
                return entry[1]
            del self._found[key_hash]
        expires = self._missing.get(key_hash)
        if expires is not None:
            if expires > now:
                return None
            del self._missing[key_hash]
        epoch = self._epoch
        row = await self._db.transaction(key_store.find_by_hash, key_hash)
        record = KeyRecord.from_row(row) if row else None
        if epoch == self._epoch:
            self._remember(key_hash, record)
        return record

    def _remember(self, key_hash: str, record: KeyRecord | None) -> None:
        now = self._clock.seconds()
        if record is None:
            self._missing[key_hash] = now + NEGATIVE_TTL_SECONDS
            while len(self._missing) > self._max_negative:
                self._missing.popitem(last=False)
        else:
            self._found[key_hash] = (now + POSITIVE_TTL_SECONDS, record)
            while len(self._found) > self._max:
                self._found.popitem(last=False)

    def __len__(self) -> int:
        return len(self._found)
