"""Step 1 of the /v1 path: who is calling (API key or login JWT), and may they call from here.

API keys are looked up by HMAC in the in-memory key cache; JWTs are verified locally and the
user comes from the user cache.  A disabled, rotated or deleted key answers exactly like an
unknown one (401), as the contract requires.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gateway import errors
from gateway.catalog.key_cache import KeyRecord
from gateway.context import GatewayContext
from gateway.frozen_init import direct_init
from gateway.session_tokens import InvalidToken
from gateway.store.gateway_users import GatewayUser
from gateway.v1 import credentials


@direct_init
@dataclass(frozen=True)
class Caller:
    user: GatewayUser
    #: None for JWT callers (no key restrictions, no key quota)
    key: KeyRecord | None
    ip: str

    @property
    def key_id(self) -> int | None:
        return self.key.id if self.key is not None else None


async def authenticate(ctx: GatewayContext, request: Any) -> Caller:
    found = credentials.extract(request)
    if found is None:
        raise errors.auth_required()
    token, _source = found
    ip = ctx.addresses.of(request)
    if credentials.is_api_key(token):
        key = await ctx.keys.lookup(ctx.key_hasher.presented(token))
        if key is None or not key.enabled:
            raise errors.invalid_api_key()
        # the common case, a user in the cache, without a Deferred made and awaited
        user = ctx.users.cached(key.user_id) or await ctx.users.get(key.user_id)
        if user is None or not user.enabled:
            raise errors.invalid_api_key()
        if not key.allows_ip(ip):
            raise errors.ip_not_allowed()
        return Caller(user=user, key=key, ip=ip)
    try:
        claims = ctx.tokens.decode(token)
    except InvalidToken:
        raise errors.invalid_session() from None
    user = await ctx.users.get(claims.user_id)
    if user is None:
        raise errors.user_not_found()
    if user.token_version != claims.token_version or not user.enabled:
        raise errors.invalid_session()
    return Caller(user=user, key=None, ip=ip)
