"""Locks in Redis at LOCK_URL that expire when their holder dies."""

from __future__ import annotations

import functools
import uuid

import redis

from .settings import get_settings

# Only the holder may renew or release: compare the token, then act, atomically.
_RENEW = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('pexpire', KEYS[1], ARGV[2]) else return 0 end"  # noqa: E501
_RELEASE = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end"  # noqa: E501
_REPLACE = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('set', KEYS[1], ARGV[2], 'PX', ARGV[3]) and 1 else return 0 end"  # noqa: E501


@functools.cache
def _client(url: str) -> redis.Redis:
    return redis.Redis.from_url(url, socket_timeout=10, socket_connect_timeout=5)


def lock_client() -> redis.Redis:
    """The Redis client for LOCK_URL (the local Redis fallback when unset)."""
    return _client(get_settings().effective_lock_url)


def replace_if_held(client: redis.Redis, key: str, held: str, value: str, ttl: float) -> bool:
    """Set `key` to `value` for `ttl` seconds if it still holds `held`; False if it changed."""
    ttl_ms = max(1, int(ttl * 1000))
    return bool(client.eval(_REPLACE, 1, key, held, value, ttl_ms))


def delete_if_held(client: redis.Redis, key: str, held: str) -> bool:
    """Delete `key` if it still holds `held`; False if it changed (or is gone)."""
    return bool(client.eval(_RELEASE, 1, key, held))


class ExpiringLock:
    """A lock held under `key` for `ttl` seconds unless renewed; a dead holder's lock expires."""

    def __init__(self, key: str, ttl: float, client: redis.Redis | None = None) -> None:
        self.key = key
        self.ttl_ms = max(1, int(ttl * 1000))
        self.client = client or lock_client()
        self.token = uuid.uuid4().hex
        self.held = False

    def acquire(self) -> bool:
        """Take the lock if nobody holds it."""
        self.held = bool(self.client.set(self.key, self.token, nx=True, px=self.ttl_ms))
        return self.held

    def renew(self) -> bool:
        """Extend the lock; False when it was lost (expired, or taken by another)."""
        self.held = bool(self.client.eval(_RENEW, 1, self.key, self.token, self.ttl_ms))
        return self.held

    def release(self) -> None:
        """Give the lock back, if still ours."""
        if self.held:
            delete_if_held(self.client, self.key, self.token)
            self.held = False
