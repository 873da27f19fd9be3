"""Per-IP and per-identity limits on the sensitive console routes (console contract §1.5)."""

from __future__ import annotations

from dataclasses import dataclass

from twisted.web.iweb import IRequest

from console.http import ApiError
from gateway.client_ip import ClientAddress
from gateway.state.protocol import SharedState

WINDOW_SECONDS = 60


@dataclass(frozen=True)
class Limit:
    """``ip_limit`` per IP per minute; ``identity_limit`` per identity (and per IP) per minute."""

    name: str
    ip_limit: int
    identity_limit: int | None = None


SETUP = Limit("setup", 5)
LOGIN = Limit("login", 15, 5)
REGISTER = Limit("register", 5, 3)
EMAIL_CODE = Limit("email_code", 5, 3)
PASSKEY = Limit("passkey", 15)
OIDC_START = Limit("oidc_start", 20)


def normalise_identity(value: str) -> str:
    return value.strip().lower()[:254]


class Throttle:
    def __init__(self, state: SharedState, addresses: ClientAddress) -> None:
        self._state = state
        self._addresses = addresses

    async def check(self, request: IRequest, limit: Limit, identity: str | None = None) -> None:
        """Raise 429 (with ``Retry-After``) when any applicable window is full."""
        ip = self._addresses.of(request)
        first = await self._state.take_all(
            [(f"throttle:{limit.name}:ip:{ip}", limit.ip_limit)], WINDOW_SECONDS
        )
        verdict = first
        if first.allowed and limit.identity_limit is not None:
            keys = [(f"throttle:{limit.name}:ip2:{ip}", limit.identity_limit)]
            if identity:
                keys.append((f"throttle:{limit.name}:id:{normalise_identity(identity)}",
                             limit.identity_limit))
            verdict = await self._state.take_all(keys, WINDOW_SECONDS)
        if not verdict.allowed:
            raise ApiError(
                429, "Too many requests. Please try again later.",
                extra={"retry_after": verdict.retry_after},
                headers={"Retry-After": str(verdict.retry_after)},
            )
