"""Login JWTs and the console session check (contract §1.3, weaknesses 2, 11, 12).

Expiry is driven by the test ``Clock``; revocation by the per-user token version; admin rights
come from the user row on every request, never from the token's claim.
"""

from __future__ import annotations

import base64

import jwt
import orjson
from sqlalchemy import delete, update
from twisted.internet.task import Clock
from twisted.trial.unittest import TestCase

from gateway.invalidation import USERS
from gateway.session_tokens import InvalidToken, TokenCodec
from gateway.store import schema
from gateway.store import users as user_store
from tests.support.app import TEST_SECRETS, AppTestCase

KEY = b"k" * 64
#: the test Clock is not wall time: let PyJWT skip its own time checks when we peek
UNCHECKED_TIMES = {"verify_exp": False, "verify_iat": False, "verify_nbf": False}


class TokenCodecTests(TestCase):
    def setUp(self) -> None:
        self.clock = Clock()
        self.clock.advance(1_000_000)
        self.codec = TokenCodec(KEY, self.clock)
        self.user = {"id": 7, "is_admin": False, "token_version": 3}

    def test_round_trip(self) -> None:
        token = self.codec.issue(self.user, 60)
        claims = self.codec.decode(token)
        assert (claims.user_id, claims.token_version, claims.is_admin) == (7, 3, False)
        raw = jwt.decode(token, KEY, algorithms=["HS256"], options=UNCHECKED_TIMES)
        assert raw["iat"] == 1_000_000 and raw["exp"] == 1_000_060
        assert jwt.get_unverified_header(token)["alg"] == "HS256"

    def test_expiry_follows_the_clock(self) -> None:
        token = self.codec.issue(self.user, 60)
        self.clock.advance(59)
        self.codec.decode(token)
        self.clock.advance(1)
        with self.assertRaises(InvalidToken):
            self.codec.decode(token)

    def test_wrong_key_other_algorithms_and_bad_claims_are_refused(self) -> None:
        now = 1_000_000
        good = {"id": 7, "tv": 0, "is_admin": False, "iat": now, "exp": now + 60}
        unsigned = (base64.urlsafe_b64encode(b'{"alg":"none","typ":"JWT"}').rstrip(b"=")
                    + b"." + base64.urlsafe_b64encode(orjson.dumps(good)).rstrip(b"=") + b".")
        bad_tokens = [
            jwt.encode(good, b"x" * 32, algorithm="HS256"),
            jwt.encode(good, KEY, algorithm="HS512"),
            unsigned.decode(),
            jwt.encode({**good, "id": True}, KEY, algorithm="HS256"),
            jwt.encode({**good, "id": -1}, KEY, algorithm="HS256"),
            jwt.encode({**good, "id": "7"}, KEY, algorithm="HS256"),
            jwt.encode({k: v for k, v in good.items() if k != "tv"}, KEY, algorithm="HS256"),
            jwt.encode({k: v for k, v in good.items() if k != "exp"}, KEY, algorithm="HS256"),
            jwt.encode({**good, "tv": "0"}, KEY, algorithm="HS256"),
            "not-a-token",
        ]
        assert self.codec.decode(jwt.encode(good, KEY, algorithm="HS256")).user_id == 7
        for token in bad_tokens:
            with self.assertRaises(InvalidToken):
                self.codec.decode(token)


class SessionTests(AppTestCase):
    async def announce_user_change(self, user_id: int) -> None:
        """What every write path does after changing a user row (the tests write it directly):
        the session check reads users from the cache this announcement invalidates."""
        await self.ctx.invalidation.announce(USERS, str(user_id).encode())

    async def test_token_expires_with_the_clock(self) -> None:
        await self.setup_admin()
        alice = await self.register("alice")
        self.clock.advance(168 * 3600 - 5)
        assert (await self.call("GET", "/api/user/me", token=alice["token"])).status == 200
        self.clock.advance(10)
        expired = await self.call("GET", "/api/user/me", token=alice["token"])
        assert expired.status == 401
        assert expired.json() == {"error": "Invalid session", "type": "unauthorized"}

    async def test_session_lifetime_setting(self) -> None:
        admin = await self.setup_admin()
        response = await self.call("PUT", "/api/settings", {"session_lifetime_hours": 1},
                                   token=admin)
        assert response.status == 200
        alice = await self.register("alice")
        self.clock.advance(3600 + 1)
        assert (await self.call("GET", "/api/user/me", token=alice["token"])).status == 401

    async def test_bumped_token_version_revokes_older_tokens(self) -> None:
        await self.setup_admin()
        alice = await self.register("alice")
        await self.ctx.db.transaction(user_store.bump_token_version, alice["user"]["id"],
                                      self.ctx.now())
        await self.announce_user_change(alice["user"]["id"])
        revoked = await self.call("GET", "/api/user/me", token=alice["token"])
        assert revoked.status == 401
        assert revoked.json()["error"] == "Invalid session"
        login = await self.call("POST", "/auth/password/login",
                                {"identifier": "alice", "password": "password123"})
        assert (await self.call("GET", "/api/user/me", token=login.json()["token"])).status == 200

    async def test_deleted_user(self) -> None:
        await self.setup_admin()
        alice = await self.register("alice")
        user_id = alice["user"]["id"]

        def remove(conn: object) -> None:
            conn.execute(delete(schema.group_memberships)  # type: ignore[attr-defined]
                         .where(schema.group_memberships.c.user_id == user_id))
            conn.execute(delete(schema.users).where(schema.users.c.id == user_id))  # type: ignore[attr-defined]

        await self.ctx.db.transaction(remove)
        await self.announce_user_change(user_id)
        response = await self.call("GET", "/api/user/me", token=alice["token"])
        assert response.status == 401
        assert response.json()["error"] == "User not found"

    async def test_admin_rights_come_from_the_user_row(self) -> None:
        await self.setup_admin()
        alice = await self.register("alice")
        forged = self.ctx.tokens.issue({"id": alice["user"]["id"], "is_admin": True,
                                        "token_version": 0}, 3600)
        assert (await self.call("GET", "/api/user/me", token=forged)).status == 200
        assert (await self.call("GET", "/api/settings", token=forged)).status == 403
        second_admin = await self.register("bob")
        await self.ctx.db.transaction(lambda conn: conn.execute(
            update(schema.users).where(schema.users.c.id == second_admin["user"]["id"])
            .values(is_admin=True)))
        await self.announce_user_change(second_admin["user"]["id"])
        assert (await self.call("GET", "/api/settings",
                                token=second_admin["token"])).status == 200
        await self.ctx.db.transaction(lambda conn: conn.execute(
            update(schema.users).where(schema.users.c.id == second_admin["user"]["id"])
            .values(is_admin=False)))
        await self.announce_user_change(second_admin["user"]["id"])
        demoted = await self.call("GET", "/api/settings", token=second_admin["token"])
        assert demoted.status == 403
        assert demoted.json()["error"] == "Admin access required"

    async def test_token_signed_with_another_secret(self) -> None:
        await self.setup_admin()
        alice = await self.register("alice")
        claims = jwt.decode(alice["token"], TEST_SECRETS.jwt_key, algorithms=["HS256"],
                            options=UNCHECKED_TIMES)
        other = jwt.encode(claims, b"another-secret-another-secret-xx", algorithm="HS256")
        assert (await self.call("GET", "/api/user/me", token=other)).status == 401

    async def test_where_the_token_may_come_from(self) -> None:
        await self.setup_admin()
        token = (await self.register("alice"))["token"]
        ok = await self.call("GET", "/api/user/me", headers={"Authorization": f"bEaReR {token}"})
        assert ok.status == 200
        for headers, path in (
            ({}, f"/api/user/me?key={token}"),
            ({}, f"/api/user/me?token={token}"),
            ({"Authorization": f"Bearer {token} extra"}, "/api/user/me"),
            ({"Authorization": f"Token {token}"}, "/api/user/me"),
            ({"Authorization": token}, "/api/user/me"),
        ):
            response = await self.call("GET", path, headers=headers)
            assert response.status == 401, (headers, path, response)
            assert response.json()["error"] == "Authorization is required"

    async def test_api_keys_are_refused_on_console_routes(self) -> None:
        await self.setup_admin()
        response = await self.call("GET", "/api/user/me", token="sk-live-1234567890")
        assert response.status == 401
        assert response.json()["type"] == "unauthorized"


class SessionOnPostgresTests(SessionTests):
    backend = "postgresql"
