"""Locks in Redis at LOCK_URL that expire when their holder dies.

Crons and the scheduler use redis-py's `Lock` (a token only its holder knows,
extended or released atomically). Idempotency claims need one thing more: to
change or delete a key only while it still holds the value a delivery read.
"""

from __future__ import annotations

import functools

import redis
from redis.lock import Lock

from workergen_runtime.settings import Settings

# Compare, then act, atomically: only a key that still holds ARGV[1] is changed.
_REPLACE = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('set', KEYS[1], ARGV[2], 'PX', ARGV[3]) and 1 else return 0 end"  # noqa: E501
_DELETE = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end"  # noqa: E501


@functools.cache
def _client(url: str) -> redis.Redis:
    return redis.Redis.from_url(url, socket_timeout=10, socket_connect_timeout=5)


def lock_client(settings: Settings) -> redis.Redis:
    """The Redis client for the LOCK_URL of these settings (local Redis when unset)."""
    return _client(settings.effective_lock_url)


def expiring_lock(settings: Settings, key: str, ttl: float) -> Lock:
    """A lock on `key` that expires `ttl` seconds after it was taken or extended.

    `acquire()` never waits: it answers whether the lock was free. The token is
    kept on the lock object rather than per thread, so a lock taken by one
    thread of a pool can be released by another.
    """
    return lock_client(settings).lock(key, timeout=ttl, blocking=False, thread_local=False)


def replace_if_held(client: redis.Redis, key: str, held: str, value: str, ttl: float) -> bool:
    """Set `key` to `value` for `ttl` seconds if it still holds `held`; False if it changed."""
    ttl_ms = max(1, int(ttl * 1000))
    return bool(client.eval(_REPLACE, 1, key, held, value, ttl_ms))


def delete_if_held(client: redis.Redis, key: str, held: str) -> bool:
    """Delete `key` if it still holds `held`; False if it changed (or is gone)."""
    return bool(client.eval(_DELETE, 1, key, held))
