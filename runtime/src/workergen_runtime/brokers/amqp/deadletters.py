"""RabbitMQ keeps dead letters in a dead-letter queue per lane (`<namespace>.<lane>.dlq`).

They arrive two ways: the worker publishes a copy with what it knows about the
failure (exception, traceback, attempts) in the `x-dead-letter` header, then
acknowledges the original; or the broker routes a rejected message, or one
delivered too often (quorum queues), through the lane's dead-letter exchange,
with its `x-death` header. Reading the queue never decodes a body that is not
JSON: refused pickle content stays bytes.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from kombu import Connection, Producer, Queue
from kombu.message import Message

from workergen_runtime.config import dead_letter_queues
from workergen_runtime.deadletter import (
    DELIVERY_LIMIT,
    REJECTED,
    DeadLetter,
    DeadLetterNotFoundError,
    DeadLetterStore,
    Unreached,
    lanes_of,
    letter_from_message,
    note_unreadable_body,
    send_again,
)
from workergen_runtime.dispatch import broker_guard
from workergen_runtime.queues import DEFAULT_LANE, dead_letter_queue
from workergen_runtime.settings import Settings
from workergen_runtime.worker.bodies import BodyError, decode_bounded

INFO_HEADER = "x-dead-letter"
BROKER_REASONS = {"rejected": REJECTED, "delivery_limit": DELIVERY_LIMIT}


class AmqpDeadLetterStore(DeadLetterStore):
    """Dead letters in the lanes' RabbitMQ dead-letter queues."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.queues = {q.name: q for q in dead_letter_queues(settings)}

    def _queue(self, lane: str) -> Queue:
        return self.queues[dead_letter_queue(lane, self.settings.queue_namespace)]

    @contextmanager
    def _connection(self) -> Iterator[Connection]:
        from workergen_runtime.celery_app import app

        with broker_guard(), app.connection_for_write() as connection:
            connection.ensure_connection(max_retries=3)
            yield connection

    def record(self, letter: DeadLetter) -> None:
        queue = self._queue(letter.lane or DEFAULT_LANE)
        info = {
            "reason": letter.reason,
            "exception": letter.exception,
            "traceback": letter.traceback,
            "attempts": letter.attempts,
            "first_failed_at": letter.first_failed_at,
            "last_failed_at": letter.last_failed_at,
            "lane": letter.lane,
            "truncated": letter.truncated,
        }
        with self._connection() as connection:
            channel = connection.channel()
            try:
                queue.bind(channel).declare()
                # confirm_publish is on for RabbitMQ: publish returns once the broker has it.
                Producer(channel).publish(
                    letter.raw_body,
                    exchange=queue.exchange,
                    routing_key=queue.routing_key,
                    headers={**letter.headers, INFO_HEADER: json.dumps(info)},
                    content_type=letter.content_type or "application/data",
                    content_encoding=letter.content_encoding or "binary",
                    delivery_mode=2,
                    message_id=letter.id,
                )
            finally:
                channel.close()

    def _scan(self, channel: Any, lane: str) -> Iterator[tuple[Message, DeadLetter]]:
        """Every message of a lane's dead-letter queue, held unacknowledged by `channel`.

        Closing the channel hands back every message that was not acknowledged.
        """
        queue = self._queue(lane).bind(channel)
        queue.declare()
        _, count, _ = queue.queue_declare(passive=True)
        for _ in range(count):
            message = queue.get(no_ack=False)
            if message is None:
                return
            self.advanced("read")
            yield message, to_letter(message, lane)

    def list(self, lane: str | None = None) -> list[DeadLetter]:
        letters = []
        with self._connection() as connection:
            for name in lanes_of(lane):
                channel = connection.channel()
                try:
                    letters.extend(letter for _, letter in self._scan(channel, name))
                finally:
                    channel.close()
        return sorted(letters, key=lambda letter: (letter.last_failed_at or "", letter.id))

    def show(self, letter_id: str) -> DeadLetter:
        for letter in self.list():
            if letter.id == letter_id:
                return letter
        raise DeadLetterNotFoundError(letter_id=letter_id)

    def replay(self, letter_id: str) -> str:
        with self._connection() as connection:
            for lane in lanes_of(None):
                channel = connection.channel()
                try:
                    for message, letter in self._scan(channel, lane):
                        if letter.id == letter_id:
                            new_id = send_again(letter, self.settings)  # confirmed by the broker
                            message.ack()
                            return new_id
                finally:
                    channel.close()
        raise DeadLetterNotFoundError(letter_id=letter_id)

    def replay_all(self, lane: str | None = None) -> list[str]:
        replayed = []
        with self._connection() as connection:
            for name in lanes_of(lane):
                channel = connection.channel()
                try:
                    for message, letter in self._scan(channel, name):
                        if not letter.replayable:
                            self.advanced("skipped")
                            continue
                        # Acknowledged once the broker confirmed the new message.
                        replayed.append(send_again(letter, self.settings))
                        message.ack()
                        self.advanced("replayed")
                finally:
                    channel.close()
        return replayed

    def purge(self, lane: str | None = None) -> int:
        removed = 0
        with self._connection() as connection:
            channel = connection.channel()
            try:
                for name in lanes_of(lane):
                    queue = self._queue(name).bind(channel)
                    queue.declare()
                    purged = queue.purge() or 0
                    self.advanced("purged", purged)
                    removed += purged
            finally:
                channel.close()
        return removed

    def unreached(self, lane: str | None = None) -> Unreached:
        """Other consumers of the dead-letter queues: AMQP counts no letter they hold.

        A queue's message count is of the letters ready to deliver; those another
        client holds unacknowledged are in no count AMQP gives, and come back to
        the queue when it acknowledges nothing and lets go.
        """
        readers = 0
        with self._connection() as connection:
            channel = connection.channel()
            try:
                for name in lanes_of(lane):
                    _, _, consumers = self._queue(name).bind(channel).queue_declare(passive=True)
                    readers += consumers
            finally:
                channel.close()
        return Unreached(readers=readers)


def to_letter(message: Message, lane: str) -> DeadLetter:
    """A dead letter from a message of a dead-letter queue (its body is never unpickled).

    A message whose dead-letter details were tampered with is a `corrupt` letter.
    """
    try:
        letter = _read_letter(message, lane)
        problem = letter.problem()
    except (TypeError, ValueError, AttributeError) as exc:
        problem = f"{type(exc).__name__}: {exc}"
    if problem:
        record_id = (message.properties or {}).get("message_id") or "?"
        return DeadLetter.corrupt(
            record_id=str(record_id), lane=lane, problem=problem, raw=message.body or b""
        )
    return letter


def _read_letter(message: Message, lane: str) -> DeadLetter:
    headers = dict(message.headers or {})
    info_raw = headers.pop(INFO_HEADER, None)
    deaths = headers.get("x-death") or []
    info: Any = {}
    if info_raw:
        try:
            info = decode_bounded(info_raw)
        except BodyError:
            info = {}
    if not isinstance(info, dict):  # tampered: what the message itself says is kept
        info = {}
    letter = letter_from_message(
        body=message.body,
        headers=headers,
        content_type=message.content_type,
        content_encoding=message.content_encoding,
        lane=info.get("lane") or lane,
        reason=info.get("reason") or _broker_reason(deaths),
        exception=info.get("exception") or _broker_exception(deaths),
        traceback=info.get("traceback"),
        attempts=int(info.get("attempts") or _broker_attempts(deaths, headers)),
        fallback_id=message.properties.get("message_id"),
    )
    if not info_raw:  # moved by RabbitMQ itself: say why its body holds no job
        note_unreadable_body(letter)
    if isinstance(info.get("truncated"), dict):
        letter.truncated = {**letter.truncated, **info["truncated"]}
    if info.get("first_failed_at"):
        letter.first_failed_at = info["first_failed_at"]
    if info.get("last_failed_at"):
        letter.last_failed_at = info["last_failed_at"]
    elif deaths and deaths[0].get("time"):
        letter.last_failed_at = str(deaths[0]["time"])
        letter.first_failed_at = letter.last_failed_at
    return letter


def _broker_reason(deaths: list[dict[str, Any]]) -> str:
    reason = str(deaths[0].get("reason", "")) if deaths else ""
    return BROKER_REASONS.get(reason, reason or REJECTED)


def _broker_exception(deaths: list[dict[str, Any]]) -> str | None:
    if not deaths:
        return None
    death = deaths[0]
    return f"dead-lettered by RabbitMQ from {death.get('queue')} ({death.get('reason')})"


def _broker_attempts(deaths: list[dict[str, Any]], headers: dict[str, Any]) -> int:
    delivery_count = headers.get("x-delivery-count")
    if isinstance(delivery_count, int):
        return delivery_count + 1
    return int(deaths[0].get("count", 1)) if deaths else 1
