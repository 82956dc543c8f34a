"""SQS keeps dead letters in a dead-letter queue per lane (`<namespace>-<lane>-dlq`).

Two kinds of message end there. The worker records a job that failed for good
as a JSON dead letter (with its error and attempts). SQS's redrive policy moves
a message received TASK_MAX_DELIVERIES times without being deleted (its worker
died each time) as it was: kombu's envelope, read back here into a dead letter.

SQS cannot peek: reading a queue receives its messages, which hides them for a
few seconds; they are made visible again at once unless they are deleted.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from ..errors import QueueUnavailableError
from ..queues import DEFAULT_LANE, dead_letter_queue
from ..settings import Settings
from . import (
    DELIVERY_LIMIT,
    DeadLetter,
    DeadLetterNotFoundError,
    DeadLetterStore,
    lanes_of,
    letter_from_message,
    send_again,
)

# Seconds a listed message stays hidden if releasing it fails; SQS shows it again after.
READ_HIDE_SECONDS = 5
RECORD_ATTRIBUTE = "dead-letter-record"


@dataclass
class _Received:
    letter: DeadLetter
    queue_url: str
    receipt_handle: str


class SqsDeadLetterStore(DeadLetterStore):
    """Dead letters in each lane's SQS dead-letter queue."""

    def __init__(self, settings: Settings, client: Any = None) -> None:
        from ..provision import sqs_client

        self.settings = settings
        self.client = client or sqs_client(settings)
        self._urls: dict[str, str] = {}

    def queue_name(self, lane: str) -> str:
        from ..provision import sqs_queue_name

        return sqs_queue_name(dead_letter_queue(lane, self.settings.queue_namespace))

    @contextmanager
    def _guard(self) -> Iterator[None]:
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            yield
        except ClientError as exc:
            error = exc.response.get("Error", {})
            code = error.get("Code", "")
            if code in ("AWS.SimpleQueueService.NonExistentQueue", "QueueDoesNotExist"):
                raise QueueUnavailableError(
                    broker=self.settings.safe_broker_url,
                    reason="a dead-letter queue does not exist; create it with: queue provision",
                ) from exc
            raise QueueUnavailableError(
                broker=self.settings.safe_broker_url, reason=f"{code}: {error.get('Message')}"
            ) from exc
        except BotoCoreError as exc:
            raise QueueUnavailableError(
                broker=self.settings.safe_broker_url, reason=str(exc)
            ) from exc

    def _url(self, lane: str) -> str:
        if lane not in self._urls:
            self._urls[lane] = self.client.get_queue_url(QueueName=self.queue_name(lane))[
                "QueueUrl"
            ]
        return self._urls[lane]

    def record(self, letter: DeadLetter) -> None:
        with self._guard():
            self.client.send_message(
                QueueUrl=self._url(letter.lane or DEFAULT_LANE),
                MessageBody=letter.to_json(),
                MessageAttributes={RECORD_ATTRIBUTE: {"DataType": "String", "StringValue": "1"}},
            )

    def _receive_all(self, lane: str) -> list[_Received]:
        """Every message of a lane's dead-letter queue, hidden until released or deleted."""
        url = self._url(lane)
        received = []
        while True:
            batch = self.client.receive_message(
                QueueUrl=url,
                MaxNumberOfMessages=10,
                VisibilityTimeout=READ_HIDE_SECONDS,
                WaitTimeSeconds=0,
                MessageAttributeNames=[RECORD_ATTRIBUTE],
                MessageSystemAttributeNames=["ApproximateReceiveCount", "SentTimestamp"],
            ).get("Messages", [])
            if not batch:
                return received
            received.extend(
                _Received(self._letter(message, lane), url, message["ReceiptHandle"])
                for message in batch
            )

    def _letter(self, message: dict[str, Any], lane: str) -> DeadLetter:
        if RECORD_ATTRIBUTE in message.get("MessageAttributes", {}):
            return DeadLetter.from_json(message["Body"])
        return moved_by_redrive(message, lane, self.settings.task_max_deliveries)

    def _release(self, items: list[_Received]) -> None:
        for item in items:
            self.client.change_message_visibility(
                QueueUrl=item.queue_url, ReceiptHandle=item.receipt_handle, VisibilityTimeout=0
            )

    def _delete(self, item: _Received) -> None:
        self.client.delete_message(QueueUrl=item.queue_url, ReceiptHandle=item.receipt_handle)

    def list(self, lane: str | None = None) -> list[DeadLetter]:
        letters = []
        with self._guard():
            for name in lanes_of(lane):
                items = self._receive_all(name)
                self._release(items)
                letters.extend(item.letter for item in items)
        return sorted(letters, key=lambda letter: (letter.last_failed_at or "", letter.id))

    @contextmanager
    def _found(self, letter_id: str) -> Iterator[_Received]:
        """The dead letter with that id, hidden meanwhile; everything else is released."""
        with self._guard():
            for lane in lanes_of(None):
                items = self._receive_all(lane)
                match = next((item for item in items if item.letter.id == letter_id), None)
                self._release([item for item in items if item is not match])
                if match is not None:
                    try:
                        yield match
                    finally:
                        self._release_quietly(match)
                    return
        raise DeadLetterNotFoundError(letter_id=letter_id)

    def _release_quietly(self, item: _Received) -> None:
        from botocore.exceptions import BotoCoreError, ClientError

        # Deleted already, or SQS shows it again after READ_HIDE_SECONDS anyway.
        with contextlib.suppress(BotoCoreError, ClientError):
            self._release([item])

    def show(self, letter_id: str) -> DeadLetter:
        with self._found(letter_id) as item:
            return item.letter

    def replay(self, letter_id: str) -> str:
        with self._found(letter_id) as item:
            new_id = send_again(item.letter, self.settings)  # returns once SQS answered SendMessage
            with self._guard():
                self._delete(item)
        return new_id

    def purge(self, lane: str | None = None) -> int:
        removed = 0
        with self._guard():
            for name in lanes_of(lane):
                for item in self._receive_all(name):
                    self._delete(item)
                    removed += 1
        return removed


def moved_by_redrive(message: dict[str, Any], lane: str, max_deliveries: int) -> DeadLetter:
    """A dead letter from a message SQS moved as it was (kombu's envelope)."""
    envelope = _envelope(message["Body"])
    properties = envelope.get("properties") or {}
    body: bytes | str = envelope.get("body", "")
    if properties.get("body_encoding") == "base64" and isinstance(body, str):
        body = _b64(body) or body
    return letter_from_message(
        body=body,
        headers=envelope.get("headers"),
        content_type=envelope.get("content-type"),
        content_encoding=envelope.get("content-encoding"),
        lane=lane,
        reason=DELIVERY_LIMIT,
        exception=(
            f"Received {max_deliveries} times and never deleted (its worker stopped each time); "
            "moved by the SQS redrive policy."
        ),
        attempts=max_deliveries,
        fallback_id=message.get("MessageId"),
    )


def _envelope(raw: str) -> dict[str, Any]:
    for text in (raw, (_b64(raw) or b"").decode("utf-8", "replace")):
        try:
            value = json.loads(text)
        except ValueError:
            continue
        if isinstance(value, dict):
            return value
    return {"body": raw}


def _b64(text: str) -> bytes | None:
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return None
