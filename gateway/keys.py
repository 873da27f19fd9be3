"""API key secrets: how a key is generated, what is stored (an HMAC), and how it is shown.

Only the HMAC-SHA256 of a key (under a key derived from the process secret) is stored, so a
database leak does not yield usable keys, and a leaked JWT key does not reveal how API keys are
hashed (console contract weakness 3).  The plaintext exists only in the create/rotate response.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets

KEY_PREFIX = "sk-"


def generate_key() -> str:
    """``sk-`` + base64url (no padding) of 32 random bytes."""
    raw = base64.urlsafe_b64encode(secrets.token_bytes(32)).rstrip(b"=").decode("ascii")
    return KEY_PREFIX + raw


def display_prefix(key: str) -> str:
    """What lists show instead of the key: first 8 characters, ``...``, last 4."""
    return f"{key[:8]}...{key[-4:]}"


def looks_like_key(token: str) -> bool:
    return token.startswith(KEY_PREFIX)


#: presented keys whose digest ``KeyHasher.presented`` remembers (a client sends the same key
#: on every request: one HMAC per request was ~2.5 % of the gateway's CPU)
PRESENTED_CACHE_SIZE = 4096
#: longer presented keys are hashed but not remembered (ours are 46 characters), so a flood of
#: huge made-up keys cannot make the map large
PRESENTED_KEY_MAX_LENGTH = 128


class KeyHasher:
    """Hashes presented keys for lookup and compares hashes in constant time.

    ``presented`` keeps a bounded map of recently presented keys to their digests.  The digest
    of a key never changes (it depends on the key and the process secret only), so the map
    needs no invalidation: disabling, rotating or deleting a key acts on the key cache the
    digest is looked up in, as before.  The map is private to this object: never logged,
    never exposed.
    """

    def __init__(self, hmac_key: bytes, presented_cache_size: int = PRESENTED_CACHE_SIZE) -> None:
        if len(hmac_key) < 16:
            raise ValueError("API key HMAC key is too short")
        self._key = hmac_key
        self._presented: dict[str, str] = {}
        self._presented_max = presented_cache_size

    def hash(self, key: str) -> str:
        return hmac.new(self._key, key.encode("utf-8"), hashlib.sha256).hexdigest()

    def presented(self, key: str) -> str:
        """``hash(key)`` for a key a client presented, remembered for its next requests.
        Bounded in count (the oldest entry goes first, so a flood of made-up keys only churns
        it) and in key length."""
        digest = self._presented.get(key)
        if digest is None:
            digest = self.hash(key)
            if len(key) > PRESENTED_KEY_MAX_LENGTH:
                return digest  # not one of ours: not worth the memory
            presented = self._presented
            if len(presented) >= self._presented_max:
                del presented[next(iter(presented))]
            presented[key] = digest
        return digest

    def matches(self, key: str, stored_hash: str) -> bool:
        return hmac.compare_digest(self.hash(key), stored_hash)
