"""SQS keeps dead letters in a dead-letter queue per lane (`<namespace>-<lane>-dlq`).

Two kinds of message end there. The worker records a job that failed for good
as a JSON dead letter (with its error and attempts). SQS's redrive policy moves
a message received TASK_MAX_DELIVERIES times without being deleted (its worker
died each time) as it was: kombu's envelope, read back here into a dead letter.

SQS cannot peek: reading a queue receives its messages, which hides them; they
are made visible again at once unless they are deleted. A pass over a queue
hides what it read for READ_HIDE_SECONDS, longer than the pass may last
(READ_PASS_SECONDS), so no letter shows up twice and the pass ends: when SQS
has nothing more, when it hands back a letter the pass already read, or at
that bound. Letters another reader holds hidden are out of reach: SQS counts
them (ApproximateNumberOfMessagesNotVisible) and `unreached` reports them.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from workergen_runtime.deadletter import (
    DELIVERY_LIMIT,
    DeadLetter,
    DeadLetterNotFoundError,
    DeadLetterStore,
    Unreached,
    lanes_of,
    letter_from_message,
    note_unreadable_body,
    send_again,
    with_body_preview,
)
from workergen_runtime.errors import QueueUnavailableError
from workergen_runtime.queues import DEFAULT_LANE, dead_letter_queue, sqs_queue_name
from workergen_runtime.settings import Settings
from workergen_runtime.worker.bodies import BodyError, decode_bounded

# A pass over a dead-letter queue (list, show, replay) lasts at most READ_PASS_SECONDS;
# what it read stays hidden meanwhile, with a margin. If releasing the letters
# fails (the command is killed), SQS shows them again after READ_HIDE_SECONDS.
READ_PASS_SECONDS = 240
READ_HIDE_SECONDS = 300
# SQS's largest batch for receive, delete and change-visibility calls.
BATCH = 10
RECORD_ATTRIBUTE = "dead-letter-record"
# SQS takes messages of up to 256 KiB: a larger record keeps a preview of its body.
MAX_RECORD_BYTES = 250 * 1024


@dataclass
class _Received:
    letter: DeadLetter
    queue_url: str
    receipt_handle: str


class SqsDeadLetterStore(DeadLetterStore):
    """Dead letters in each lane's SQS dead-letter queue."""

    def __init__(self, settings: Settings, client: Any = None) -> None:
        from workergen_runtime.ops.provision import sqs_client

        self.settings = settings
        self.client = client or sqs_client(settings)
        self._urls: dict[str, str] = {}
        # A pass stopped at READ_PASS_SECONDS with letters left unread.
        self.timed_out = False
        # Lane -> (letters hidden by another reader, the queue's visibility timeout)
        # as a pass began: counted before the pass hides any letter itself.
        self._hidden: dict[str, tuple[int, int]] = {}

    def queue_name(self, lane: str) -> str:
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
        record = letter.to_json()
        if len(record.encode()) > MAX_RECORD_BYTES:
            record = with_body_preview(letter).to_json()
        with self._guard():
            self.client.send_message(
                QueueUrl=self._url(letter.lane or DEFAULT_LANE),
                MessageBody=record,
                MessageAttributes={RECORD_ATTRIBUTE: {"DataType": "String", "StringValue": "1"}},
            )

    def _pass(self, lane: str) -> Iterator[list[_Received]]:
        """A lane's letters batch by batch, each once, hidden until released or deleted."""
        seen: set[str] = set()
        url = self._url(lane)
        deadline = time.monotonic() + READ_PASS_SECONDS
        for batch in self._batches(lane, READ_HIDE_SECONDS):
            fresh = [message for message in batch if message["MessageId"] not in seen]
            again = [message for message in batch if message["MessageId"] in seen]
            seen.update(message["MessageId"] for message in fresh)
            received = [
                _Received(self._letter(message, lane), url, message["ReceiptHandle"])
                for message in fresh
            ]
            self.advanced("read", len(received))
            yield received
            if again:
                # A letter came round again: the pass has read the whole queue.
                self._release_handles(url, [message["ReceiptHandle"] for message in again])
                return
            if time.monotonic() > deadline:
                self.timed_out = True
                return

    def _receive_all(self, lane: str) -> list[_Received]:
        """Every message of a lane's dead-letter queue, once, hidden until released or deleted."""
        return [item for batch in self._pass(lane) for item in batch]

    def _batches(self, lane: str, hide: int) -> Iterator[list[dict[str, Any]]]:
        """Receive a lane's dead-letter queue, ten at a time, until SQS has nothing more."""
        url = self._url(lane)
        self._hidden[lane] = self._hidden_now(url)
        while True:
            batch = self.client.receive_message(
                QueueUrl=url,
                MaxNumberOfMessages=BATCH,
                VisibilityTimeout=hide,
                WaitTimeSeconds=0,
                MessageAttributeNames=[RECORD_ATTRIBUTE],
                MessageSystemAttributeNames=["ApproximateReceiveCount", "SentTimestamp"],
            ).get("Messages", [])
            if not batch:
                return
            yield batch

    def _letter(self, message: dict[str, Any], lane: str) -> DeadLetter:
        record_id = message.get("MessageId") or "?"
        if RECORD_ATTRIBUTE in message.get("MessageAttributes", {}):
            return DeadLetter.from_record(message["Body"], record_id=record_id, lane=lane)
        try:
            letter = moved_by_redrive(message, lane, self.settings.task_max_deliveries)
            return note_unreadable_body(letter)
        except (TypeError, ValueError, AttributeError) as exc:  # a tampered envelope
            problem = f"{type(exc).__name__}: {exc}"
            return DeadLetter.corrupt(
                record_id=record_id, lane=lane, problem=problem, raw=message.get("Body") or ""
            )

    def _release(self, items: list[_Received]) -> None:
        by_queue: dict[str, list[str]] = {}
        for item in items:
            by_queue.setdefault(item.queue_url, []).append(item.receipt_handle)
        for url, handles in by_queue.items():
            self._release_handles(url, handles)

    def _release_handles(self, url: str, handles: list[str]) -> None:
        """Make received letters visible again at once."""
        for start in range(0, len(handles), BATCH):
            self.client.change_message_visibility_batch(
                QueueUrl=url,
                Entries=[
                    {"Id": str(n), "ReceiptHandle": handle, "VisibilityTimeout": 0}
                    for n, handle in enumerate(handles[start : start + BATCH])
                ],
            )

    def _delete(self, items: list[_Received]) -> None:
        for start in range(0, len(items), BATCH):
            chunk = items[start : start + BATCH]
            self.client.delete_message_batch(
                QueueUrl=chunk[0].queue_url,
                Entries=[
                    {"Id": str(n), "ReceiptHandle": item.receipt_handle}
                    for n, item in enumerate(chunk)
                ],
            )

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
                        self._release_quietly([match])
                    return
        raise DeadLetterNotFoundError(letter_id=letter_id)

    def _release_quietly(self, items: list[_Received]) -> None:
        from botocore.exceptions import BotoCoreError, ClientError

        # Deleted already, or SQS shows them again after READ_HIDE_SECONDS anyway.
        with contextlib.suppress(BotoCoreError, ClientError):
            self._release(items)

    def show(self, letter_id: str) -> DeadLetter:
        with self._found(letter_id) as item:
            return item.letter

    def replay(self, letter_id: str) -> str:
        with self._found(letter_id) as item:
            new_id = send_again(item.letter, self.settings)  # returns once SQS answered SendMessage
            with self._guard():
                self._delete([item])
        return new_id

    def replay_all(self, lane: str | None = None) -> list[str]:
        """Replay batch by batch in one pass: each batch is deleted once its jobs are sent.

        A crash between a send and its batch's delete duplicates at most a batch
        (ten jobs), never loses one. Letters that cannot be replayed stay hidden
        until the end of the pass (so it never meets them again), then are released.
        """
        new_ids: list[str] = []
        kept: list[_Received] = []
        try:
            with self._guard():
                for name in lanes_of(lane):
                    for batch in self._pass(name):
                        sent: list[_Received] = []
                        done = 0
                        try:
                            for item in batch:
                                if item.letter.replayable:
                                    new_ids.append(send_again(item.letter, self.settings))
                                    sent.append(item)
                                    self.advanced("replayed")
                                else:
                                    kept.append(item)
                                    self.advanced("skipped")
                                done += 1
                        finally:
                            self._delete(sent)
                            kept.extend(batch[done:])  # not reached: a send failed
        finally:
            self._release_quietly(kept)
        return new_ids

    def purge(self, lane: str | None = None) -> int:
        """Delete every letter, batch by batch as it is received: the pass ends with the queue."""
        removed = 0
        with self._guard():
            for name in lanes_of(lane):
                url = self._url(name)
                deadline = time.monotonic() + READ_PASS_SECONDS
                for batch in self._batches(name, READ_HIDE_SECONDS):
                    deleted = self.client.delete_message_batch(
                        QueueUrl=url,
                        Entries=[
                            {"Id": str(n), "ReceiptHandle": message["ReceiptHandle"]}
                            for n, message in enumerate(batch)
                        ],
                    )
                    purged = len(deleted.get("Successful", []))
                    self.advanced("purged", purged)
                    removed += purged
                    if time.monotonic() > deadline:
                        self.timed_out = True
                        break
        return removed

    def _hidden_now(self, url: str) -> tuple[int, int]:
        """(letters received and not yet deleted or released, the queue's visibility timeout)."""
        attributes = self.client.get_queue_attributes(
            QueueUrl=url,
            AttributeNames=["ApproximateNumberOfMessagesNotVisible", "VisibilityTimeout"],
        )["Attributes"]
        return (
            int(attributes.get("ApproximateNumberOfMessagesNotVisible", 0)),
            int(attributes.get("VisibilityTimeout", 0)),
        )

    def unreached(self, lane: str | None = None) -> Unreached:
        """Letters another reader held hidden as the pass began, and how long they may stay so.

        Counted before the pass (SQS's count lags: letters the pass itself hid
        and released may still count as hidden just after). A reader hides
        letters for its own visibility timeout: a `dlq` command for
        READ_HIDE_SECONDS at most, anyone else for the queue's default.
        """
        in_flight, longest = 0, READ_HIDE_SECONDS
        with self._guard():
            for name in lanes_of(lane):
                hidden, timeout = self._hidden.get(name) or self._hidden_now(self._url(name))
                in_flight += hidden
                longest = max(longest, timeout)
        return Unreached(
            in_flight=in_flight, retry_after=longest if in_flight else 0, timed_out=self.timed_out
        )


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
            value = decode_bounded(text)
        except BodyError:
            continue
        if isinstance(value, dict):
            return value
    return {"body": raw}


def _b64(text: str) -> bytes | None:
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return None
