"""Dead letters: jobs that will not run again by themselves, kept for a person to decide.

Every broker keeps them in its own way (RabbitMQ: a dead-letter queue per lane;
Redis: records the project writes itself; SQS: a redrive queue), behind one
interface, `DeadLetterStore`, that the `dlq` command drives.
"""

from __future__ import annotations

import base64
import json
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, field, fields, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from workergen_runtime.errors import ProjectError
from workergen_runtime.worker.bodies import MAX_BODY_BYTES as BODY_BOUND
from workergen_runtime.worker.bodies import BodyError, body_digest, decode_bounded

if TYPE_CHECKING:
    from workergen_runtime.settings import Settings

# Why a job became a dead letter.
FAILED = "failed"  # raised an error that is not retried, or ran out of retries
TIME_LIMIT = "time-limit"  # killed by the hard time limit
DELIVERY_LIMIT = "delivery-limit"  # delivered too often: it keeps killing its worker
REFUSED = "refused"  # content the worker never decodes (pickle, YAML, ...)
MALFORMED = "malformed"  # not a task message the worker can read (see inbound.py)
UNKNOWN_TASK = "unknown-task"  # no job of that name is registered
REJECTED = "rejected"  # rejected without requeue (by the job or by the broker)
POISON = "poison"  # its handling ended the worker's main process on every delivery

CORRUPT = "corrupt"  # a stored record that cannot be read back (listed, never replayed)

JSON_CONTENT = "application/json"

# What a dead letter keeps at most (docs/dead-letters.md). The full sizes of
# what was cut are noted in the record's `truncated`.
MAX_EXCEPTION_CHARS = 4 * 1024
MAX_TRACEBACK_CHARS = 16 * 1024
# A body larger than the worker takes (bodies.py): a 64 KiB preview, not replayable.
MAX_BODY_BYTES = BODY_BOUND
BODY_PREVIEW_BYTES = 64 * 1024
MAX_HEADERS_CHARS = 16 * 1024
MAX_HEADER_VALUE_CHARS = 256
# A stored record, read back: its body as JSON text (escapes may take 6 bytes a
# byte) and the rest. Its headers are kept as they came, so they may nest deeper
# than a body may (64 levels): a record nested deeper is listed as corrupt.
MAX_RECORD_BYTES = 8 * MAX_BODY_BYTES
MAX_RECORD_DEPTH = 256


def utcnow() -> str:
    """The current time as ISO 8601 in UTC, as dead letters record it."""
    return datetime.now(UTC).isoformat(timespec="seconds")


@dataclass
class DeadLetter:
    """One job that ended in a dead-letter queue, with what is known about its failure."""

    id: str
    task_name: str | None
    task_id: str | None
    lane: str | None
    args: list[Any] | None
    kwargs: dict[str, Any] | None
    reason: str = FAILED
    exception: str | None = None
    traceback: str | None = None
    attempts: int = 1
    first_failed_at: str | None = None
    last_failed_at: str | None = None
    # The original message, so it can be inspected and replayed as it was sent.
    headers: dict[str, Any] = field(default_factory=dict)
    body: str = ""
    body_encoding: str = "utf-8"  # "utf-8" or "base64" (content that is not text)
    content_type: str | None = None
    content_encoding: str | None = None
    # Field name -> full size, for what was cut to the sizes above.
    truncated: dict[str, int] = field(default_factory=dict)

    @property
    def raw_body(self) -> bytes:
        """The body bytes exactly as they were on the queue."""
        if self.body_encoding == "base64":
            return base64.b64decode(self.body)
        return self.body.encode("utf-8")

    @property
    def replayable(self) -> bool:
        """Only a decodable JSON job, kept whole, can be put back on a lane."""
        return (
            bool(self.task_name)
            and self.args is not None
            and self.kwargs is not None
            and "body" not in self.truncated
            and self.reason != CORRUPT
        )

    def to_json(self) -> str:
        return json.dumps(asdict(self), default=str, sort_keys=True)

    @classmethod
    def from_json(cls, raw: str | bytes) -> DeadLetter:
        """A stored record; raises ValueError when it is not one this project wrote."""
        data = decode_bounded(raw, max_bytes=MAX_RECORD_BYTES, max_depth=MAX_RECORD_DEPTH)
        if not isinstance(data, dict):
            raise ValueError("not a JSON object")
        known = {f.name: f for f in fields(cls)}
        letter = cls(**{k: v for k, v in data.items() if k in known})
        problem = letter.problem()
        if problem:
            raise ValueError(problem)
        return letter

    @classmethod
    def from_record(cls, raw: str | bytes, *, record_id: str, lane: str | None) -> DeadLetter:
        """A stored record, or a `corrupt` letter saying why it cannot be read."""
        try:
            return cls.from_json(raw)
        except (ValueError, TypeError) as exc:
            return cls.corrupt(record_id=record_id, lane=lane, problem=str(exc), raw=raw)

    @classmethod
    def corrupt(
        cls, *, record_id: str, lane: str | None, problem: str, raw: str | bytes
    ) -> DeadLetter:
        """A record that cannot be read: listed so a person can purge it, never replayed."""
        text, encoding = encode_body(raw[:BODY_PREVIEW_BYTES])
        return cls(
            id=record_id,
            task_name=None,
            task_id=None,
            lane=lane,
            args=None,
            kwargs=None,
            reason=CORRUPT,
            exception=f"corrupt dead-letter record: {problem[:200]}",
            body=text,
            body_encoding=encoding,
            truncated={"body": len(raw)} if len(raw) > BODY_PREVIEW_BYTES else {},
        )

    def problem(self) -> str | None:
        """What makes this record unreadable (tampered or from elsewhere), or None."""
        from workergen_runtime import project

        text_fields = ("id", "reason", "body", "body_encoding")
        for name in text_fields:
            if not isinstance(getattr(self, name), str):
                return f"{name} is not a string"
        for name in (
            "task_name",
            "task_id",
            "exception",
            "traceback",
            "first_failed_at",
            "last_failed_at",
            "content_type",
            "content_encoding",
        ):
            if getattr(self, name) is not None and not isinstance(getattr(self, name), str):
                return f"{name} is not a string"
        if self.lane is not None and self.lane not in project.LANES:
            return f"lane {self.lane!r} is not one of this project's lanes"
        if self.args is not None and not isinstance(self.args, list):
            return "args is not a list"
        if self.kwargs is not None and not isinstance(self.kwargs, dict):
            return "kwargs is not an object"
        if not isinstance(self.attempts, int) or isinstance(self.attempts, bool):
            return "attempts is not a number"
        if not isinstance(self.headers, dict) or not isinstance(self.truncated, dict):
            return "headers or truncated is not an object"
        if self.body_encoding not in ("utf-8", "base64"):
            return f"unknown body encoding {self.body_encoding!r}"
        if self.body_encoding == "base64":
            try:
                base64.b64decode(self.body, validate=True)
            except ValueError:
                return "body is not base64"
        return None


def with_body_preview(letter: DeadLetter) -> DeadLetter:
    """The letter with only a preview of its body, for a store that cannot hold it all."""
    raw = letter.raw_body
    if len(raw) <= BODY_PREVIEW_BYTES:
        return letter
    text, encoding = encode_body(raw[:BODY_PREVIEW_BYTES])
    return replace(
        letter,
        args=None,
        kwargs=None,
        body=text,
        body_encoding=encoding,
        truncated={**letter.truncated, "body": letter.truncated.get("body", len(raw))},
    )


def note_unreadable_body(letter: DeadLetter) -> DeadLetter:
    """A JSON letter the broker moved, whose body does not decode within bounds, says why.

    Such a letter is listed and shown like any other, never replayed.
    """
    if letter.content_type != JSON_CONTENT or letter.args is not None or "body" in letter.truncated:
        return letter
    try:
        decode_bounded(letter.raw_body)
    except BodyError as exc:
        note = f"body cannot be read: {exc}"
        letter.exception = f"{note}; {letter.exception}" if letter.exception else note
    return letter


def encode_body(body: bytes | str) -> tuple[str, str]:
    """(text, encoding) for a message body: UTF-8 text when it is text, else base64."""
    if isinstance(body, str):
        return body, "utf-8"
    try:
        return body.decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        return base64.b64encode(body).decode("ascii"), "base64"


def job_call(body: bytes | str, content_type: str | None) -> tuple[list[Any] | None, dict | None]:
    """(args, kwargs) of a task message body; (None, None) when it is not JSON within bounds.

    Content other than JSON is never decoded here: a pickle body stays bytes.
    """
    if content_type != JSON_CONTENT:
        return None, None
    try:
        decoded = decode_bounded(body)
    except BodyError:
        return None, None
    if isinstance(decoded, list) and len(decoded) >= 2:  # protocol 2: [args, kwargs, embed]
        args, kwargs = decoded[0], decoded[1]
    elif isinstance(decoded, dict):  # protocol 1
        args, kwargs = decoded.get("args"), decoded.get("kwargs")
    else:
        return None, None
    if isinstance(args, list) and isinstance(kwargs, dict):
        return args, kwargs
    return None, None


def wire_call(call: tuple[Any, Any]) -> tuple[list[Any], dict[str, Any]]:
    """(args, kwargs) as they travel: kombu's JSON types (dates, UUIDs...) kept for a replay."""
    from kombu.utils.json import dumps

    args, kwargs = json.loads(dumps([list(call[0]), dict(call[1])]))
    return args, kwargs


def letter_from_message(
    *,
    body: bytes | str,
    headers: Mapping[str, Any] | None,
    content_type: str | None,
    content_encoding: str | None,
    lane: str | None,
    reason: str,
    exception: str | None = None,
    traceback: str | None = None,
    attempts: int = 1,
    first_failed_at: str | None = None,
    fallback_id: str | None = None,
    call: tuple[Any, Any] | bool | None = True,
) -> DeadLetter:
    """Build a dead letter from a message as it came off a lane.

    `call` is the (args, kwargs) the worker already decoded, None when it has
    none (the body is kept as it came, never decoded again), or True to decode
    the body here (a letter read back from a broker's dead-letter queue).
    """
    headers = dict(headers) if isinstance(headers, Mapping) else {}
    truncated: dict[str, int] = {}
    size = len(body)
    if size > MAX_BODY_BYTES:
        truncated["body"] = size
        args, kwargs = None, None
        text, encoding = encode_body(body[:BODY_PREVIEW_BYTES])
    else:
        if call is True:
            args, kwargs = job_call(body, content_type)
        elif call:
            args, kwargs = wire_call(call)
        else:
            args, kwargs = None, None
        text, encoding = encode_body(body)
    exception = _cut(exception, MAX_EXCEPTION_CHARS, "exception", truncated)
    traceback = _cut(traceback, MAX_TRACEBACK_CHARS, "traceback", truncated, keep_end=True)
    task_id = headers.get("id")
    if not (isinstance(task_id, str) and 0 < len(task_id) <= 255):
        task_id = None
    if not (isinstance(fallback_id, str) and 0 < len(fallback_id) <= 255):
        fallback_id = None
    task_name = headers.get("task")
    if not (isinstance(task_name, str) and len(task_name) <= 255):
        task_name = None
    now = utcnow()
    return DeadLetter(
        id=task_id or fallback_id or body_digest(body),
        task_name=task_name,
        task_id=task_id,
        lane=lane,
        args=args,
        kwargs=kwargs,
        reason=reason,
        exception=exception,
        traceback=traceback,
        attempts=attempts,
        first_failed_at=first_failed_at or now,
        last_failed_at=now,
        headers=_bounded_headers(_json_safe(headers), truncated),
        body=text,
        body_encoding=encoding,
        content_type=content_type if isinstance(content_type, str) else None,
        content_encoding=content_encoding if isinstance(content_encoding, str) else None,
        truncated=truncated,
    )


def _cut(
    text: str | None, limit: int, name: str, truncated: dict[str, int], *, keep_end: bool = False
) -> str | None:
    """Text cut to `limit` characters (a traceback keeps its end, where the error is)."""
    if text is None or len(text) <= limit:
        return text
    truncated[name] = len(text)
    marker = f"[... {len(text)} characters in all]"
    kept = limit - len(marker) - 1
    return marker + "\n" + text[-kept:] if keep_end else text[:kept] + " " + marker


def _bounded_headers(headers: dict[str, Any], truncated: dict[str, int]) -> dict[str, Any]:
    """Headers as kept: when they are large, every long value is cut."""
    size = len(json.dumps(headers))
    if size <= MAX_HEADERS_CHARS:
        return headers
    truncated["headers"] = size
    kept: dict[str, Any] = {}
    for name, value in list(headers.items())[:64]:
        text = value if isinstance(value, str) else json.dumps(value)
        if len(text) > MAX_HEADER_VALUE_CHARS:
            value = text[:MAX_HEADER_VALUE_CHARS] + "..."
        kept[str(name)[:MAX_HEADER_VALUE_CHARS]] = value
    return kept


def _json_safe(value: Any) -> Any:
    """Headers as JSON can hold them (AMQP tables may carry bytes and datetimes).

    Headers that JSON cannot hold at all (names that are not text, nesting too
    deep) are kept as a printed preview, so a letter is always recorded.
    """
    try:
        return json.loads(json.dumps(value, default=str))
    except (TypeError, ValueError, RecursionError):
        from workergen_runtime.worker.inbound import preview

        return {"unreadable_headers": preview(value, MAX_HEADER_VALUE_CHARS)}


@dataclass
class Unreached:
    """Dead letters a command could not read, so its count is not taken for all of them."""

    # Hidden by another reader for now (SQS: received, not yet deleted or released).
    in_flight: int = 0
    # Seconds until those show again, at most (the longest any reader hides them).
    retry_after: int = 0
    # Other consumers of the queue: the letters they hold unacknowledged are not
    # counted by the broker (RabbitMQ).
    readers: int = 0
    # The command stopped at its time bound with letters left (READ_PASS_SECONDS).
    timed_out: bool = False

    def __bool__(self) -> bool:
        return bool(self.in_flight or self.readers or self.timed_out)


class DeadLetterNotFoundError(ProjectError, LookupError):
    """No dead letter has that id."""

    def __init__(self, *, letter_id: str) -> None:
        self.letter_id = letter_id
        super().__init__(
            f"No dead letter with id {letter_id!r}. List them with: dlq list (ids are task ids)."
        )


class NotReplayableError(ProjectError):
    """The dead letter is not a JSON job (e.g. refused pickle content): it cannot run."""

    def __init__(self, *, letter_id: str) -> None:
        super().__init__(
            f"Dead letter {letter_id!r} is not a JSON job (refused or undecodable content) "
            "and cannot be replayed. Inspect it with `dlq show`, then purge it."
        )


class DeadLetterStore(ABC):
    """Where a broker keeps dead letters; the `dlq` command works through this only."""

    @abstractmethod
    def record(self, letter: DeadLetter) -> None:
        """Keep a dead letter; returns once the broker has it (a crash may duplicate it)."""

    @abstractmethod
    def list(self, lane: str | None = None) -> list[DeadLetter]:
        """The dead letters of one lane, or of every lane, oldest first."""

    @abstractmethod
    def show(self, letter_id: str) -> DeadLetter:
        """One dead letter; raises DeadLetterNotFoundError."""

    @abstractmethod
    def replay(self, letter_id: str) -> str:
        """Put the job back on its lane with fresh attempts; returns the new task id.

        The dead letter is removed only after the broker confirmed the new
        message: a crash in between duplicates the job, it never loses it.
        """

    # Told of each letter a long command gets through ("read", "replayed", "skipped",
    # "purged"), so the `dlq` command can show progress.
    progress: Callable[[str, int], None] | None = None

    def advanced(self, what: str, count: int = 1) -> None:
        if self.progress is not None and count:
            self.progress(what, count)

    def replay_all(self, lane: str | None = None) -> list[str]:
        """Replay every replayable dead letter (of a lane); returns the new task ids."""
        new_ids = []
        for letter in self.list(lane):
            if not letter.replayable:
                self.advanced("skipped")
                continue
            new_ids.append(self.replay(letter.id))
            self.advanced("replayed")
        return new_ids

    def unreached(self, lane: str | None = None) -> Unreached:
        """The letters the last command could not reach: the store's own count, after it."""
        return Unreached()

    @abstractmethod
    def purge(self, lane: str | None = None) -> int:
        """Delete the dead letters of a lane (or all); returns how many were deleted."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release connections."""


def store_for(settings: Settings) -> DeadLetterStore:
    """The dead-letter store of the configured broker."""
    from workergen_runtime.errors import ConfigurationError

    kind = settings.broker_kind
    if kind == "redis":
        from workergen_runtime.brokers.redis.deadletters import RedisDeadLetterStore

        return RedisDeadLetterStore(settings)
    if kind == "amqp":
        from workergen_runtime.brokers.amqp.deadletters import AmqpDeadLetterStore

        return AmqpDeadLetterStore(settings)
    if kind == "sqs":
        from workergen_runtime.brokers.sqs.deadletters import SqsDeadLetterStore

        return SqsDeadLetterStore(settings)
    raise ConfigurationError(
        f"The {kind!r} broker keeps no dead letters; use Redis, RabbitMQ or SQS as BROKER_URL."
    )


def lanes_of(lane: str | None) -> Iterable[str]:
    """The lane asked for (checked), or every lane of the project."""
    from workergen_runtime import project
    from workergen_runtime.queues import check_lane

    return [check_lane(lane)] if lane else list(project.LANES)


# Headers a replay keeps: what the job is, not how often it was tried.
KEPT_HEADERS = ("idempotency_key",)


def replay_headers(letter: DeadLetter) -> dict[str, Any]:
    """The new message's headers: where it came from, and the keys that identify its work."""
    kept = {name: letter.headers[name] for name in KEPT_HEADERS if name in letter.headers}
    return {**kept, "replayed_from": letter.id}


def send_again(letter: DeadLetter, settings: Settings) -> str:
    """Publish the job of a dead letter on its lane as a new task; returns its id.

    The queue is the lane's under the namespace of `settings`. The publish
    returns once the broker has the message (Redis: the push is done;
    RabbitMQ: publisher confirm; SQS: SendMessage answered).
    """
    import uuid

    from workergen_runtime.celery_app import app
    from workergen_runtime.dispatch import broker_guard
    from workergen_runtime.queues import DEFAULT_LANE, qualified_queue

    if not letter.replayable:
        raise NotReplayableError(letter_id=letter.id)
    new_id = str(uuid.uuid4())
    with broker_guard(settings):
        app.send_task(
            letter.task_name,
            args=letter.args,
            kwargs=letter.kwargs,
            task_id=new_id,
            queue=qualified_queue(letter.lane or DEFAULT_LANE, settings.queue_namespace),
            headers=replay_headers(letter),
        )
    return new_id


__all__ = [
    "CORRUPT",
    "DELIVERY_LIMIT",
    "FAILED",
    "MALFORMED",
    "POISON",
    "REFUSED",
    "REJECTED",
    "TIME_LIMIT",
    "UNKNOWN_TASK",
    "DeadLetter",
    "DeadLetterNotFoundError",
    "DeadLetterStore",
    "NotReplayableError",
    "Unreached",
    "lanes_of",
    "letter_from_message",
    "send_again",
    "store_for",
    "utcnow",
]
