"""API key secrets and the gateway's key cache (real database, invalidation through the bus)."""

from __future__ import annotations

import base64
import hashlib
import hmac

from twisted.internet.defer import ensureDeferred

from gateway.catalog.key_cache import NEGATIVE_TTL_SECONDS, KeyCache, KeyRecord
from gateway.invalidation import KEYS, USERS, Invalidation
from gateway.keys import KeyHasher, display_prefix, generate_key, looks_like_key
from gateway.store import api_keys as key_store
from tests.support.app import TEST_SECRETS, AppTestCase


def test_generated_keys_are_sk_plus_unpadded_base64url_of_32_bytes():
    keys = {generate_key() for _ in range(200)}
    assert len(keys) == 200
    for key in keys:
        assert looks_like_key(key)
        body = key[3:]
        assert len(body) == 43 and "=" not in body
        assert len(base64.urlsafe_b64decode(body + "=")) == 32


def test_prefix_shows_first_eight_and_last_four():
    assert display_prefix("sk-4fJ9abcdefghXw2Q") == "sk-4fJ9a...Xw2Q"


def test_hash_is_hmac_sha256_under_the_derived_key():
    hasher = KeyHasher(TEST_SECRETS.api_key_hmac_key)
    key = "sk-example"
    expected = hmac.new(TEST_SECRETS.api_key_hmac_key, key.encode(), hashlib.sha256).hexdigest()
    assert hasher.hash(key) == expected
    assert hasher.hash(key) != hashlib.sha256(key.encode()).hexdigest()
    assert hasher.matches(key, expected)
    assert not hasher.matches("sk-other", expected)
    assert KeyHasher(b"x" * 32).hash(key) != expected


def test_short_hmac_key_is_refused():
    try:
        KeyHasher(b"short")
    except ValueError:
        return
    raise AssertionError("accepted a short key")


class KeyCacheTests(AppTestCase):
    async def make_key(self, **fields):
        await self.setup_admin()
        admin = await self.register("keyowner")
        plaintext = generate_key()
        key_hash = self.ctx.key_hasher.hash(plaintext)
        values = dict(name="k", allowed_models=["m1"], allowed_user_channels=[],
                      allowed_ips=["10.0.0.0/8"], quota_limit_nanos=5, enabled=True)
        values.update(fields)
        row = await self.ctx.db.transaction(
            key_store.create, user_id=admin["user"]["id"], key_hash=key_hash,
            key_prefix=display_prefix(plaintext), now=self.ctx.now(), **values)
        return row, key_hash

    async def test_lookup_reads_once_then_serves_from_memory(self):
        row, key_hash = await self.make_key()
        record = await self.ctx.keys.lookup(key_hash)
        assert isinstance(record, KeyRecord)
        assert record.id == row["id"] and record.quota_limit_nanos == 5
        assert record.allows_ip("10.1.2.3") and not record.allows_ip("11.0.0.1")
        assert record.allows_model("models/m1") and not record.allows_model("m2")
        # change the row behind the cache's back: still cached until announced
        await self.ctx.db.transaction(key_store.update_fields, row["user_id"], row["id"],
                                      {"enabled": False}, self.ctx.now())
        assert (await self.ctx.keys.lookup(key_hash)).enabled is True
        await self.ctx.invalidation.announce(KEYS, key_hash.encode())
        assert (await self.ctx.keys.lookup(key_hash)).enabled is False

    async def test_star_drops_everything(self):
        _row, key_hash = await self.make_key()
        await self.ctx.keys.lookup(key_hash)
        assert self.ctx.keys.cached(key_hash) is not None
        await self.ctx.invalidation.announce(KEYS, b"*")
        assert self.ctx.keys.cached(key_hash) is None

    async def test_unknown_hash_is_cached_briefly(self):
        row, _key_hash = await self.make_key()
        missing = "0" * 64
        assert await self.ctx.keys.lookup(missing) is None
        # insert a key with that hash: the negative answer holds until its TTL ends
        await self.ctx.db.transaction(
            key_store.create, user_id=row["user_id"], key_hash=missing, key_prefix="sk-x...y",
            name="late", allowed_models=[], allowed_user_channels=[], allowed_ips=[],
            quota_limit_nanos=0, enabled=True, now=self.ctx.now())
        assert await self.ctx.keys.lookup(missing) is None
        self.clock.advance(NEGATIVE_TTL_SECONDS + 1)
        assert (await self.ctx.keys.lookup(missing)).name == "late"

    async def test_a_read_racing_an_invalidation_is_not_cached(self):
        _row, key_hash = await self.make_key()
        cache = KeyCache(self.ctx.db, self.clock)
        pending = ensureDeferred(cache.lookup(key_hash))
        cache.drop(key_hash)  # announced while the read is in flight
        assert (await pending) is not None
        assert cache.cached(key_hash) is None

    async def test_cache_is_bounded(self):
        _row, key_hash = await self.make_key()
        cache = KeyCache(self.ctx.db, self.clock, max_entries=1, max_negative=2)
        for i in range(5):
            await cache.lookup(f"{i:064d}")
        assert len(cache._missing) == 2
        await cache.lookup(key_hash)
        assert len(cache) == 1

    async def test_an_announcement_from_another_node_drops_the_key(self):
        _row, key_hash = await self.make_key()
        await self.ctx.keys.lookup(key_hash)
        other_node = Invalidation(self.ctx.state)
        self.addCleanup(other_node.close)
        await other_node.announce(KEYS, key_hash.encode())
        assert self.ctx.keys.cached(key_hash) is None

    async def test_a_user_announcement_drops_only_that_users_keys(self):
        row, key_hash = await self.make_key()
        await self.ctx.keys.lookup(key_hash)
        await self.ctx.invalidation.announce(USERS, str(row["user_id"] + 100).encode())
        assert self.ctx.keys.cached(key_hash) is not None
        await self.ctx.invalidation.announce(USERS, str(row["user_id"]).encode())
        assert self.ctx.keys.cached(key_hash) is None
        await self.ctx.keys.lookup(key_hash)
        await self.ctx.invalidation.announce(USERS, b"*")
        assert self.ctx.keys.cached(key_hash) is None


def test_a_presented_keys_digest_is_its_hmac_and_is_remembered_within_a_bound():
    hasher = KeyHasher(TEST_SECRETS.api_key_hmac_key, presented_cache_size=8)
    keys = [f"sk-presented-{n}" for n in range(20)]
    for key in keys:
        assert hasher.presented(key) == hasher.hash(key)
        assert hasher.presented(key) == hasher.hash(key)  # from the map this time
    remembered = hasher._presented
    assert len(remembered) == 8
    assert list(remembered) == keys[-8:]  # the oldest went first
    # a digest is served from the map, not recomputed
    remembered[keys[-1]] = "remembered"
    assert hasher.presented(keys[-1]) == "remembered"


def test_an_overlong_presented_key_is_hashed_but_not_remembered():
    hasher = KeyHasher(TEST_SECRETS.api_key_hmac_key)
    huge = "sk-" + "x" * 10_000
    assert hasher.presented(huge) == hasher.hash(huge)
    assert huge not in hasher._presented
    real = generate_key()
    assert hasher.presented(real) == hasher.hash(real) and real in hasher._presented
