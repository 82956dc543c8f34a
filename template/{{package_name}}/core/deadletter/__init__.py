"""Dead letters: jobs that will not run again by themselves, kept for a person to decide.

Every broker keeps them in its own way (RabbitMQ: a dead-letter queue per lane;
Redis: records the project writes itself; SQS: a redrive queue), behind one
interface, `DeadLetterStore`, that the `dlq` command drives.
"""

from __future__ import annotations

import base64
import json
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field, fields
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from ..errors import ProjectError

if TYPE_CHECKING:
    from ..settings import Settings

# Why a job became a dead letter.
FAILED = "failed"  # raised an error that is not retried, or ran out of retries
TIME_LIMIT = "time-limit"  # killed by the hard time limit
DELIVERY_LIMIT = "delivery-limit"  # delivered too often: it keeps killing its worker
REFUSED = "refused"  # content the worker never decodes (pickle, garbage)
UNKNOWN_TASK = "unknown-task"  # no job of that name is registered
REJECTED = "rejected"  # rejected without requeue (by the job or by the broker)

JSON_CONTENT = "application/json"


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

    @property
    def raw_body(self) -> bytes:
        """The body bytes exactly as they were on the queue."""
        if self.body_encoding == "base64":
            return base64.b64decode(self.body)
        return self.body.encode("utf-8")

    @property
    def replayable(self) -> bool:
        """Only a decodable JSON job can be put back on a lane."""
        return bool(self.task_name) and self.args is not None and self.kwargs is not None

    def to_json(self) -> str:
        return json.dumps(asdict(self), default=str, sort_keys=True)

    @classmethod
    def from_json(cls, raw: str | bytes) -> DeadLetter:
        data = json.loads(raw)
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})


def encode_body(body: bytes | str) -> tuple[str, str]:
    """(text, encoding) for a message body: UTF-8 text when it is text, else base64."""
    if isinstance(body, str):
        return body, "utf-8"
    try:
        return body.decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        return base64.b64encode(body).decode("ascii"), "base64"


def job_call(body: bytes | str, content_type: str | None) -> tuple[list[Any] | None, dict | None]:
    """(args, kwargs) of a task message body; (None, None) when it is not JSON.

    Content other than JSON is never decoded here: a pickle body stays bytes.
    """
    if content_type != JSON_CONTENT:
        return None, None
    try:
        decoded = json.loads(body)
    except (ValueError, TypeError):
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
) -> DeadLetter:
    """Build a dead letter from a message as it came off a lane."""
    headers = dict(headers or {})
    text, encoding = encode_body(body)
    args, kwargs = job_call(body, content_type)
    task_id = headers.get("id") if isinstance(headers.get("id"), str) else None
    now = utcnow()
    return DeadLetter(
        id=task_id or fallback_id or _body_id(body),
        task_name=headers.get("task") if isinstance(headers.get("task"), str) else None,
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
        headers=_json_safe(headers),
        body=text,
        body_encoding=encoding,
        content_type=content_type,
        content_encoding=content_encoding,
    )


def _body_id(body: bytes | str) -> str:
    import hashlib

    raw = body.encode() if isinstance(body, str) else body
    return "body-" + hashlib.sha1(raw, usedforsecurity=False).hexdigest()[:16]


def _json_safe(value: Any) -> Any:
    """Headers as JSON can hold them (AMQP tables may carry bytes and datetimes)."""
    return json.loads(json.dumps(value, default=str))


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

    def replay_all(self, lane: str | None = None) -> list[str]:
        """Replay every replayable dead letter (of a lane); returns the new task ids."""
        return [self.replay(letter.id) for letter in self.list(lane) if letter.replayable]

    @abstractmethod
    def purge(self, lane: str | None = None) -> int:
        """Delete the dead letters of a lane (or all); returns how many were deleted."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release connections."""


def store_for(settings: Settings) -> DeadLetterStore:
    """The dead-letter store of the configured broker."""
    from ..errors import ConfigurationError

    kind = settings.broker_kind
    if kind == "redis":
        from .redis import RedisDeadLetterStore

        return RedisDeadLetterStore(settings)
    if kind == "amqp":
        from .amqp import AmqpDeadLetterStore

        return AmqpDeadLetterStore(settings)
    if kind == "sqs":
        from .sqs import SqsDeadLetterStore

        return SqsDeadLetterStore(settings)
    raise ConfigurationError(
        f"The {kind!r} broker keeps no dead letters; use Redis, RabbitMQ or SQS as BROKER_URL."
    )


def lanes_of(lane: str | None) -> Iterable[str]:
    """The lane asked for (checked), or every lane of the project."""
    from .. import project
    from ..queues import check_lane

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

    from ..celery_app import app
    from ..dispatch import broker_guard
    from ..queues import DEFAULT_LANE, qualified_queue

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
    "DELIVERY_LIMIT",
    "FAILED",
    "REFUSED",
    "REJECTED",
    "TIME_LIMIT",
    "UNKNOWN_TASK",
    "DeadLetter",
    "DeadLetterNotFoundError",
    "DeadLetterStore",
    "NotReplayableError",
    "letter_from_message",
    "lanes_of",
    "send_again",
    "store_for",
    "utcnow",
]
