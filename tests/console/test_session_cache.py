"""Console authentication from memory, with revocation as immediate as a database read.

The session check verifies each token string once (the codec's bounded cache) and reads the
user from the gateway's ``UserCache``; these tests pin down that neither cache weakens a
security rule (console contract §0, weakness 12): every revocation path -- password change,
disable, demotion, deletion -- refuses the old token on the very next request, although the
user was cached by an earlier request; an expired token is refused though its signature check
is cached; the token cache stays bounded; and a console request pays no transaction for auth.
"""

from __future__ import annotations

import jwt
from twisted.internet.task import Clock
from twisted.trial.unittest import TestCase

from gateway.session_tokens import DEFAULT_CACHED_TOKENS, InvalidToken, TokenCodec
from tests.support.app import AppTestCase

KEY = b"k" * 64
#: a route that authenticates with ``Sessions.user`` and then lists (one read of its own)
LISTING = "/api/user/api-keys"


class TokenCacheTests(TestCase):
    def setUp(self) -> None:
        self.clock = Clock()
        self.clock.advance(1_000_000)

    def token(self, codec: TokenCodec, user_id: int = 7, lifetime: int = 60) -> str:
        return codec.issue({"id": user_id, "is_admin": False, "token_version": 0}, lifetime)

    def test_an_expired_token_is_refused_even_when_cached(self) -> None:
        codec = TokenCodec(KEY, self.clock)
        token = self.token(codec)
        assert codec.decode(token).user_id == 7
        assert codec.cached == 1
        self.clock.advance(59)
        assert codec.decode(token).user_id == 7  # served from the cache, still valid
        self.clock.advance(1)
        for _ in range(2):
            with self.assertRaises(InvalidToken):
                codec.decode(token)

    def test_the_cache_is_keyed_by_the_whole_token(self) -> None:
        codec = TokenCodec(KEY, self.clock)
        token = self.token(codec)
        codec.decode(token)
        claims = jwt.decode(token, options={"verify_signature": False})
        forged = jwt.encode(claims, b"x" * 64, algorithm="HS256")
        header, payload, _signature = token.split(".")
        for bad in (forged, f"{header}.{payload}.", f"{header}.{payload}.AAAA", token + "A"):
            with self.assertRaises(InvalidToken):
                codec.decode(bad)

    def test_the_cache_stays_bounded(self) -> None:
        codec = TokenCodec(KEY, self.clock, max_cached=3)
        tokens = [self.token(codec, user_id=n) for n in range(1, 11)]
        for token in tokens:
            codec.decode(token)
            assert codec.cached <= 3
        assert codec.cached == 3
        # evicted tokens are verified again, not refused
        assert codec.decode(tokens[0]).user_id == 1

    def test_the_default_bound_holds_under_a_flood(self) -> None:
        codec = TokenCodec(KEY, self.clock)
        for n in range(DEFAULT_CACHED_TOKENS + 50):
            codec.decode(self.token(codec, user_id=n + 1))
        assert codec.cached == DEFAULT_CACHED_TOKENS == 10_000


class ConsoleRevocationTests(AppTestCase):
    """Each test first uses the token (so the user is cached), then revokes, then retries."""

    async def signed_in(self, name: str) -> tuple[int, str]:
        user = await self.register(name)
        token = user["token"]
        assert (await self.call("GET", LISTING, token=token)).status == 200  # now cached
        return user["user"]["id"], token

    async def promoted(self, admin: str, name: str) -> tuple[int, str]:
        user_id, token = await self.signed_in(name)
        promoted = await self.call("PUT", f"/api/users/{user_id}", {"is_admin": True},
                                   token=admin)
        assert promoted.status == 200, promoted
        assert (await self.call("GET", "/api/settings", token=token)).status == 200
        return user_id, token

    async def test_password_change_refuses_the_old_token_at_once(self) -> None:
        await self.setup_admin()
        _, token = await self.signed_in("alice")
        changed = await self.call("POST", "/api/user/password/change", {
            "current_password": "password123", "new_password": "another-pass-456"},
            token=token)
        assert changed.status == 200, changed
        old = await self.call("GET", LISTING, token=token)
        assert old.status == 401
        assert old.json() == {"error": "Invalid session", "type": "unauthorized"}
        assert (await self.call("GET", LISTING, token=changed.json()["token"])).status == 200

    async def test_disable_refuses_the_old_token_at_once(self) -> None:
        admin = await self.setup_admin()
        user_id, token = await self.signed_in("alice")
        disabled = await self.call("PUT", f"/api/users/{user_id}", {"enabled": False},
                                   token=admin)
        assert disabled.status == 200, disabled
        assert (await self.call("GET", LISTING, token=token)).status == 401
        login = await self.call("POST", "/auth/password/login",
                                {"identifier": "alice", "password": "password123"})
        assert login.status == 403

    async def test_demotion_refuses_the_old_token_and_admin_routes_at_once(self) -> None:
        admin = await self.setup_admin()
        user_id, token = await self.promoted(admin, "bob")
        demoted = await self.call("PUT", f"/api/users/{user_id}", {"is_admin": False},
                                  token=admin)
        assert demoted.status == 200, demoted
        old = await self.call("GET", "/api/settings", token=token)
        assert old.status == 401
        assert old.json()["error"] == "Invalid session"
        login = await self.call("POST", "/auth/password/login",
                                {"identifier": "bob", "password": "password123"})
        fresh = login.json()["token"]
        assert (await self.call("GET", LISTING, token=fresh)).status == 200
        refused = await self.call("GET", "/api/settings", token=fresh)
        assert refused.status == 403
        assert refused.json()["error"] == "Admin access required"

    async def test_deletion_refuses_the_old_token_at_once(self) -> None:
        admin = await self.setup_admin()
        user_id, token = await self.signed_in("alice")
        deleted = await self.call("DELETE", f"/api/users/{user_id}", token=admin)
        assert deleted.status == 200, deleted
        gone = await self.call("GET", LISTING, token=token)
        assert gone.status == 401
        assert gone.json()["error"] == "User not found"

    async def test_a_new_account_on_a_deleted_users_id_is_served_at_once(self) -> None:
        """A missing user is not remembered: SQLite gives the newest deleted user's id to the
        next registration, which announces nothing."""
        admin = await self.setup_admin()
        user_id, token = await self.signed_in("alice")
        assert (await self.call("DELETE", f"/api/users/{user_id}", token=admin)).status == 200
        assert (await self.call("GET", LISTING, token=token)).status == 401
        carol = await self.register("carol")
        # SQLite hands the id out again (PostgreSQL's sequence does not: nothing to confuse)
        assert (carol["user"]["id"] == user_id) == (self.backend != "postgresql")
        assert (await self.call("GET", LISTING, token=carol["token"])).status == 200

    async def test_an_expired_token_is_refused_though_user_and_token_are_cached(self) -> None:
        await self.setup_admin()
        _, token = await self.signed_in("alice")
        self.clock.advance(168 * 3600 - 1)
        assert (await self.call("GET", LISTING, token=token)).status == 200
        self.clock.advance(1)
        expired = await self.call("GET", LISTING, token=token)
        assert expired.status == 401
        assert expired.json()["error"] == "Invalid session"

    async def transactions_of(self, path: str, token: str) -> int:
        before = self.ctx.db.transactions
        response = await self.call("GET", path, token=token)
        assert response.status == 200, response
        return int(self.ctx.db.transactions - before)

    async def test_a_console_get_pays_no_transaction_for_auth(self) -> None:
        admin = await self.setup_admin()
        _, token = await self.signed_in("alice")
        await self.call("GET", "/api/settings", token=admin)  # the admin is cached too
        # admin settings are served from memory: the request costs no transaction at all
        assert await self.transactions_of("/api/settings", admin) == 0
        # a listing costs exactly its own read
        assert await self.transactions_of(LISTING, token) == 1


class ConsoleRevocationOnPostgresTests(ConsoleRevocationTests):
    backend = "postgresql"
