"""Redis keeps no dead letters by itself: the project records them, one hash per lane.

The hash is named like the lane's dead-letter queue (`<namespace>.<lane>.dlq`)
and maps a dead letter's id (the task id) to its JSON record.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import redis

from workergen_runtime.deadletter import (
    CORRUPT,
    DeadLetter,
    DeadLetterNotFoundError,
    DeadLetterStore,
    lanes_of,
    send_again,
)
from workergen_runtime.errors import QueueUnavailableError
from workergen_runtime.queues import DEFAULT_LANE, dead_letter_queue
from workergen_runtime.settings import Settings, mask_password

# Records read by one HSCAN call.
SCAN_PAGE = 100


class RedisDeadLetterStore(DeadLetterStore):
    """Dead letters as records in the broker's Redis."""

    def __init__(self, settings: Settings, url: str | None = None) -> None:
        self.settings = settings
        self.url = url or settings.effective_broker_url
        self.client = redis.Redis.from_url(self.url, socket_connect_timeout=5, socket_timeout=30)

    def key(self, lane: str) -> str:
        return dead_letter_queue(lane, self.settings.queue_namespace)

    @contextmanager
    def _guard(self) -> Iterator[None]:
        try:
            yield
        except redis.RedisError as exc:
            raise QueueUnavailableError(
                broker=mask_password(self.url), reason=str(exc) or type(exc).__name__
            ) from exc

    def record(self, letter: DeadLetter) -> None:
        key = self.key(letter.lane or DEFAULT_LANE)
        with self._guard():
            # The same job dead-lettered again (e.g. redelivered after a crash
            # between recording and acknowledging) keeps its first failure time.
            previous = self.client.hget(key, letter.id)
            if previous:
                # A corrupt record under the same id is replaced, never a reason to fail.
                kept = DeadLetter.from_record(previous, record_id=letter.id, lane=letter.lane)
                if kept.reason != CORRUPT and kept.first_failed_at:
                    letter.first_failed_at = kept.first_failed_at
            self.client.hset(key, letter.id, letter.to_json())

    def list(self, lane: str | None = None) -> list[DeadLetter]:
        letters = []
        with self._guard():
            for name in lanes_of(lane):
                # A page at a time: a record may hold a megabyte of body. HSCAN may
                # return a record twice (the hash grew meanwhile): each is kept once.
                found: dict[str, DeadLetter] = {}
                for field, raw in self.client.hscan_iter(self.key(name), count=SCAN_PAGE):
                    record_id = _text(field)
                    if record_id not in found:
                        found[record_id] = DeadLetter.from_record(
                            raw, record_id=record_id, lane=name
                        )
                        self.advanced("read")
                letters.extend(found.values())
        return sorted(letters, key=lambda letter: (letter.last_failed_at or "", letter.id))

    def _find(self, letter_id: str) -> tuple[str, DeadLetter]:
        with self._guard():
            for lane in lanes_of(None):
                raw = self.client.hget(self.key(lane), letter_id)
                if raw:
                    letter = DeadLetter.from_record(raw, record_id=letter_id, lane=lane)
                    return self.key(lane), letter
        raise DeadLetterNotFoundError(letter_id=letter_id)

    def show(self, letter_id: str) -> DeadLetter:
        return self._find(letter_id)[1]

    def replay(self, letter_id: str) -> str:
        key, letter = self._find(letter_id)
        new_id = send_again(letter, self.settings)  # returns once Redis holds the new message
        with self._guard():
            self.client.hdel(key, letter_id)
        return new_id

    def purge(self, lane: str | None = None) -> int:
        removed = 0
        with self._guard():
            for name in lanes_of(lane):
                pipe = self.client.pipeline(transaction=True)
                pipe.hlen(self.key(name)).delete(self.key(name))
                purged = int(pipe.execute()[0])
                self.advanced("purged", purged)
                removed += purged
        return removed

    def close(self) -> None:
        self.client.close()


def _text(value: bytes | str) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else value
