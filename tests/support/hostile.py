"""Malformed messages, put straight on a lane's queue as a hostile or broken producer would.

`hostile_messages(seed, count)` draws a deterministic mix of bad task messages:
wrong types in every header the worker reads, missing id or task, bodies that
are not JSON or not UTF-8 or of the wrong shape, refused content, huge headers,
and (Redis, SQS) envelopes kombu cannot read. Every message carries a token so
its dead letter can be found.
"""

from __future__ import annotations

import base64
import json
import pickle
import random
import runpy
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

# The table of wrong headers and bodies is the runtime's tests' own (their
# test_intake_total.py sends each entry through the worker's intake in process):
# one table, read here from runtime/tests.
TABLE = runpy.run_path(str(Path(__file__).parents[2] / "runtime/tests/hostile_table.py"))
WRONG_HEADERS: dict[str, list[Any]] = TABLE["WRONG_HEADERS"]
WRONG_BODIES: list[bytes] = TABLE["WRONG_BODIES"]
# SQS takes messages of up to 256 KiB (the envelope base64-encodes the body).
SQS_MAX_BODY = 150 * 1024


@dataclass
class Hostile:
    """One bad message: a task message to envelope, or a raw envelope (Redis, SQS only)."""

    token: str
    kind: str  # what is wrong, for failure messages
    headers: Any = None
    body: bytes = b""
    content_type: str | None = "application/json"
    content_encoding: str | None = "utf-8"
    raw_envelope: bytes | None = None  # set: the envelope itself is broken
    reason: str = "malformed"
    properties: dict[str, Any] = field(default_factory=dict)

    @property
    def sqs_ready(self) -> bool:
        """SQS gives every message its delivery tag (its receipt handle): none is no fault.

        And it takes no message larger than 256 KiB.
        """
        return self.kind != "envelope: no delivery tag" and len(self.body) <= SQS_MAX_BODY

    @property
    def amqp_ready(self) -> bool:
        """RabbitMQ's envelope is the protocol: only header and body faults can be sent."""
        return (
            self.raw_envelope is None
            and not self.properties
            and (self.headers is None or isinstance(self.headers, dict))
        )


def _task_headers(token: str, task: str) -> dict[str, Any]:
    return {"lang": "py", "task": task, "id": f"bad-{token}", "retries": 0, "argsrepr": token}


def _body(token: str) -> bytes:
    return json.dumps([["/nowhere", token], {}, {}]).encode()


def hostile_messages(seed: int, count: int, task: str) -> list[Hostile]:
    """Every entry of the table once, then a seeded mix up to `count` bad messages for `task`.

    The same ones for the same seed.
    """
    rng = random.Random(seed)

    def token() -> str:
        return f"tok{seed}x{len(messages)}x{uuid.UUID(int=rng.getrandbits(128)).hex[:8]}"

    messages: list[Hostile] = []
    for name, values in WRONG_HEADERS.items():
        for value in values:
            messages.append(_with_header(token(), task, name, value))
    for body in WRONG_BODIES:
        messages.append(_with_body(token(), task, body))
    makers = [
        _wrong_header,
        _wrong_header,
        _wrong_header,
        _missing,
        _wrong_body,
        _wrong_body,
        _refused,
        _huge_headers,
        _broken_envelope,
        _broken_envelope,
    ]
    while len(messages) < count:
        messages.append(rng.choice(makers)(rng, token(), task))
    return messages


def table_kinds() -> set[str]:
    """The kind of every message the table makes (what `hostile_messages` sends first)."""
    return {
        *(
            _with_header("t", "t", name, value).kind
            for name, values in WRONG_HEADERS.items()
            for value in values
        ),
        *(_with_body("t", "t", body).kind for body in WRONG_BODIES),
    }


def _with_header(token: str, task: str, name: str, value: Any) -> Hostile:
    headers = _task_headers(token, task)
    headers[name] = value
    return Hostile(token, f"header {name}={value!r:.60}", headers, _body(token))


def _with_body(token: str, task: str, body: bytes) -> Hostile:
    kind = f"body {body[:30]!r} ({len(body)} bytes)"
    if body.startswith(b"\xff"):
        body = body + token.encode()  # so its dead letter can be found
    return Hostile(token, kind, _task_headers(token, task), body)


def _wrong_header(rng: random.Random, token: str, task: str) -> Hostile:
    name = rng.choice(sorted(WRONG_HEADERS))
    return _with_header(token, task, name, rng.choice(WRONG_HEADERS[name]))


def _missing(rng: random.Random, token: str, task: str) -> Hostile:
    headers = _task_headers(token, task)
    missing = rng.choice(["id", "task", "both", "headers"])
    if missing == "headers":
        return Hostile(token, "no headers", None, _body(token))
    for name in ("id", "task") if missing == "both" else (missing,):
        del headers[name]
    return Hostile(token, f"missing {missing}", headers, _body(token))


def _wrong_body(rng: random.Random, token: str, task: str) -> Hostile:
    body = rng.choice(WRONG_BODIES)
    if body.startswith(b"\xff"):
        body = body + token.encode()
    kind = f"body {body[:30]!r}"
    headers = _task_headers(token, task)
    if rng.random() < 0.2:
        return Hostile(token, kind + " without content type", headers, body, content_type=None)
    if rng.random() < 0.1:
        return Hostile(
            token,
            kind + " unknown encoding",
            headers,
            _body(token),
            "application/json",
            "no-such-codec",
        )
    return Hostile(token, kind, headers, body)


def _refused(rng: random.Random, token: str, task: str) -> Hostile:
    headers = _task_headers(token, task)
    content_type, body = rng.choice(
        [
            ("application/x-python-serialize", pickle.dumps((["/nowhere", token], {}, {}))),
            ("application/x-yaml", f"- [/nowhere, {token}]\n- {{}}\n".encode()),
            ("text/plain", token.encode()),
        ]
    )
    encoding = "binary" if "python" in content_type else "utf-8"
    return Hostile(
        token, f"content {content_type}", headers, body, content_type, encoding, reason="refused"
    )


def _huge_headers(rng: random.Random, token: str, task: str) -> Hostile:
    headers = _task_headers(token, task)
    name = rng.choice(["argsrepr", "x-padding", "kwargsrepr"])
    headers[name] = token + "\x1b[31m" + "A" * 100_000
    return Hostile(token, f"huge header {name}", headers, _body(token))


def _broken_envelope(rng: random.Random, token: str, task: str) -> Hostile:
    """An envelope kombu's Redis and SQS transports cannot read."""
    good = {
        "body": base64.b64encode(_body(token)).decode(),
        "content-encoding": "utf-8",
        "content-type": "application/json",
        "headers": _task_headers(token, task),
        "properties": {
            "body_encoding": "base64",
            "delivery_tag": str(uuid.uuid4()),
            "delivery_mode": 2,
            "priority": 0,
        },
    }
    fault = rng.choice(
        [
            "not json",
            "not utf-8",
            "a list",
            "no properties",
            "properties not an object",
            "no delivery tag",
            "bad base64",
            "unknown body encoding",
            "headers a list",
            "delivery_info a string",
            "priority a string",
            "body a number",
        ]
    )
    if fault == "not json":
        raw = f"{{not json {token}".encode()
    elif fault == "not utf-8":
        raw = b"\xff\xfe" + token.encode() + b"\xc3\x28"
    elif fault == "a list":
        raw = json.dumps([token, good]).encode()
    else:
        envelope = json.loads(json.dumps(good))
        properties = envelope["properties"]
        if fault == "no properties":
            del envelope["properties"]
        elif fault == "properties not an object":
            envelope["properties"] = token
        elif fault == "no delivery tag":
            del properties["delivery_tag"]
        elif fault == "bad base64":
            envelope["body"] = f"!!{token}!!"
        elif fault == "unknown body encoding":
            properties["body_encoding"] = "rot13"
        elif fault == "headers a list":
            envelope["headers"] = [token]
        elif fault == "delivery_info a string":
            properties["delivery_info"] = token
        elif fault == "priority a string":
            properties["priority"] = token
        elif fault == "body a number":
            envelope["body"] = 12345
        raw = json.dumps(envelope).encode()
    return Hostile(token, f"envelope: {fault}", raw_envelope=raw)


def kombu_envelope(message: Hostile, queue: str) -> bytes:
    """The JSON envelope kombu's virtual transports keep in a queue."""
    if message.raw_envelope is not None:
        return message.raw_envelope
    envelope = {
        "body": base64.b64encode(message.body).decode(),
        "content-encoding": message.content_encoding,
        "content-type": message.content_type,
        "headers": message.headers,
        "properties": {
            "body_encoding": "base64",
            "delivery_tag": str(uuid.uuid4()),
            "delivery_mode": 2,
            "priority": 0,
            "delivery_info": {"exchange": queue, "routing_key": queue},
            **message.properties,
        },
    }
    return json.dumps(envelope).encode()


def put_on_redis(url: str, queue: str, messages: list[Hostile]) -> None:
    import redis

    client = redis.Redis.from_url(url)
    try:
        for message in messages:
            client.lpush(queue, kombu_envelope(message, queue))
    finally:
        client.close()


def put_on_rabbitmq(url: str, queue: str, messages: list[Hostile]) -> None:
    """Publish with the AMQP client itself, to the lane's exchange, as they are."""
    import amqp

    parts = urlsplit(url)
    connection = amqp.Connection(
        f"{parts.hostname}:{parts.port or 5672}",
        userid=parts.username or "guest",
        password=parts.password or "guest",
    )
    connection.connect()
    try:
        channel = connection.channel()
        for message in messages:
            properties: dict[str, Any] = {"delivery_mode": 2}
            if message.headers is not None:
                properties["application_headers"] = message.headers
            if message.content_type:
                properties["content_type"] = message.content_type
            if message.content_encoding:
                properties["content_encoding"] = message.content_encoding
            # Wait for the broker's confirm of each message: one not confirmed
            # when the connection closes may be lost (quorum lanes under load
            # lost the last ones of a batch). Mandatory: one that no queue
            # takes raises instead of vanishing.
            channel.basic_publish_confirm(
                amqp.Message(message.body, **properties),
                exchange=queue,
                routing_key=queue,
                mandatory=True,
            )
    finally:
        connection.close()


def put_on_sqs(client: Any, queue_url: str, queue: str, messages: list[Hostile]) -> None:
    for message in messages:
        raw = kombu_envelope(message, queue)
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            text = None
        # kombu base64-encodes its envelopes; SQS takes text only, so bytes
        # that are not UTF-8 go as base64 too (kombu decodes them back).
        if text is None or message.raw_envelope is None:
            text = base64.b64encode(raw).decode()
        client.send_message(QueueUrl=queue_url, MessageBody=text)


def found_in(letter: dict[str, Any], token: str) -> bool:
    """Whether a listed dead letter (`dlq list --json`) holds the message with this token."""
    text = json.dumps(letter)
    if token in text:
        return True
    # Bodies kept as base64 (bytes that are not text; SQS: text that is base64).
    raw = _base64(letter.get("body") or "")
    return token.encode() in raw or token.encode() in _nested_base64(raw)


def _base64(text: str) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except ValueError:
        return b""


def _nested_base64(raw: bytes) -> bytes:
    """A quarantined kombu envelope keeps its own body base64-encoded."""
    try:
        envelope = json.loads(raw)
        body = envelope.get("body") if isinstance(envelope, dict) else None
        return base64.b64decode(body) if isinstance(body, str) else b""
    except ValueError:
        return b""
