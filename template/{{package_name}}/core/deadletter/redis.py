"""Redis keeps no dead letters by itself: the project records them, one hash per lane.

The hash is named like the lane's dead-letter queue (`<namespace>.<lane>.dlq`)
and maps a dead letter's id (the task id) to its JSON record.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import redis

from ..errors import QueueUnavailableError
from ..queues import DEFAULT_LANE, dead_letter_queue
from ..settings import Settings, mask_password
from . import DeadLetter, DeadLetterNotFoundError, DeadLetterStore, lanes_of, send_again


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
                letter.first_failed_at = DeadLetter.from_json(previous).first_failed_at
            self.client.hset(key, letter.id, letter.to_json())

    def list(self, lane: str | None = None) -> list[DeadLetter]:
        letters = []
        with self._guard():
            for name in lanes_of(lane):
                letters.extend(DeadLetter.from_json(v) for v in self.client.hvals(self.key(name)))
        return sorted(letters, key=lambda letter: (letter.last_failed_at or "", letter.id))

    def _find(self, letter_id: str) -> tuple[str, DeadLetter]:
        with self._guard():
            for lane in lanes_of(None):
                raw = self.client.hget(self.key(lane), letter_id)
                if raw:
                    return self.key(lane), DeadLetter.from_json(raw)
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
                removed += int(pipe.execute()[0])
        return removed

    def close(self) -> None:
        self.client.close()
