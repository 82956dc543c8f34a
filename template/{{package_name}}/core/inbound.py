"""Everything that arrives on a queue is untrusted: what a message must be before Celery reads it.

Celery's worker trusts its messages: a header of the wrong type, a body of the
wrong shape or an envelope the transport cannot parse raises in the consumer,
which then restarts or ends the worker, and the message comes back to do it
again. Here a message is checked first; one that fails a check is dead-lettered
as `malformed` (or `refused`, for content that is never decoded) and never runs.

Two levels:
- the envelope: Redis and SQS keep kombu's JSON envelope in the queue, which a
  foreign producer can break (not JSON, no properties, ...). `readable_envelope`
  turns what cannot be read into a quarantine envelope that carries the raw
  bytes and the problem; RabbitMQ's envelope is the protocol itself.
- the task message: headers, content type and body (`message_problem`).
"""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from .deadletter import MALFORMED, REFUSED

# Envelope property of a quarantined message: what made it unreadable.
MALFORMED_PROPERTY = "malformed"
JSON_CONTENT = "application/json"

# Celery's own headers are short (argsrepr/kwargsrepr are cut at 1 KiB); a
# message whose headers take more than this is not a task message.
MAX_HEADERS_SIZE = 32 * 1024
MAX_ID_LENGTH = 255
MAX_NAME_LENGTH = 255
# Checked on every message: a tuple of types is checked faster than `list | tuple`.
SEQUENCE = (list, tuple)
NUMBER = (int, float)


def _text(value: Any) -> bool:
    return isinstance(value, str)


def _identifier(value: Any) -> bool:
    return isinstance(value, str) and 0 < len(value) <= MAX_ID_LENGTH


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _flag(value: Any) -> bool:
    return isinstance(value, bool)


def _time(value: Any) -> bool:
    if isinstance(value, datetime):
        return True
    if not isinstance(value, str):
        return False
    from celery.utils.time import maybe_iso8601

    try:
        maybe_iso8601(value)
    except (AttributeError, ValueError, TypeError, OverflowError):
        return False
    return True


def _limit(value: Any) -> bool:
    return value is None or (
        isinstance(value, NUMBER) and not isinstance(value, bool) and value >= 0
    )


def _limits(value: Any) -> bool:
    """[hard, soft] (Celery's order): each a non-negative number or null."""
    return isinstance(value, SEQUENCE) and len(value) == 2 and _limit(value[0]) and _limit(value[1])


def _texts(value: Any) -> bool:
    return isinstance(value, SEQUENCE) and all(isinstance(item, str) for item in value)


def _mapping(value: Any) -> bool:
    return type(value) is dict or isinstance(value, Mapping)


# Every header the worker reads, and what it must be when present (null is
# always allowed, except for `id` and `task`).
HEADER_CHECKS: dict[str, tuple[Callable[[Any], bool], str]] = {
    "id": (_identifier, f"a non-empty string of at most {MAX_ID_LENGTH} characters"),
    "task": (_identifier, f"a non-empty string of at most {MAX_NAME_LENGTH} characters"),
    "retries": (_count, "a non-negative integer"),
    "timelimit": (_limits, "[hard, soft], each a non-negative number or null"),
    "eta": (_time, "an ISO 8601 date and time"),
    "expires": (_time, "an ISO 8601 date and time"),
    "argsrepr": (_text, "a string"),
    "kwargsrepr": (_text, "a string"),
    "root_id": (_identifier, "an id string"),
    "parent_id": (_identifier, "an id string"),
    "group": (_identifier, "an id string"),
    "group_index": (_count, "a non-negative integer"),
    "shadow": (_text, "a string"),
    "origin": (_text, "a string"),
    "lang": (_text, "a string"),
    "meth": (_text, "a string"),
    "ignore_result": (_flag, "true or false"),
    "replaced_task_nesting": (_count, "a non-negative integer"),
    "stamped_headers": (_texts, "a list of strings"),
    "stamps": (_mapping, "an object"),
    # The project's own.
    "first_failed_at": (_text, "a string"),
    "idempotency_key": (_text, "a string"),
    "replayed_from": (_text, "a string"),
}
REQUIRED_HEADERS = ("task", "id")

# Envelope properties that Redis and SQS read back, and what they must be.
PROPERTY_CHECKS: dict[str, Callable[[Any], bool]] = {
    "delivery_tag": lambda value: isinstance(value, str) and bool(value),
    "body_encoding": lambda value: value in ("base64", "utf-8"),
    "delivery_info": _mapping,
    "priority": lambda value: isinstance(value, int) and not isinstance(value, bool),
    "reply_to": _text,
    "correlation_id": _text,
    MALFORMED_PROPERTY: _text,
}


def preview(value: Any, limit: int = 80) -> str:
    """A short, printable repr of a hostile value, for a dead letter's reason."""
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "..."


# The size bound of `_sound`, in twelfths of a character of JSON. A character of
# a string takes at most 12 characters of JSON (an astral one as two `\uXXXX`
# escapes), so a string counts its length and its quotes. Other values count
# their repr, of which a character stands for at most 12 of JSON too (`None`,
# `True`, numbers and separators take as long in both), except the scalars:
# the JSON of None, a bool, or an int or float within SMALL_INT either way
# (`-999999999999999999`, `-1.2345678901234567e-308`) takes at most 24
# characters, two twelfths, and they count that without being printed.
SCALAR_TWELFTHS = 2
SCALARS = (bool, int, float)
SMALL_INT = 10**18
# A header's name counts as a string (its length and its quotes), and a twelfth
# for the ": " and ", " around its value (4 characters).
NAME_TWELFTHS = 2 + 1

# Headers whose check a string passes by its length alone (see `_sound`).
_TEXTS = frozenset(name for name, (check, _) in HEADER_CHECKS.items() if check is _text)
_IDENTIFIERS = frozenset(name for name, (check, _) in HEADER_CHECKS.items() if check is _identifier)
_CHECKS = {name: check for name, (check, _) in HEADER_CHECKS.items()}


def header_problem(headers: Any) -> str | None:
    """What is wrong with a task message's headers, or None."""
    if type(headers) is dict and _sound(headers):
        return None
    return _header_fault(headers)


def _sound(headers: dict[Any, Any]) -> bool:
    """Whether headers pass every check of `_header_fault`, told in one pass over them.

    Every message is checked and most are sound: this says so quickly. It walks
    the headers once, applying their checks (a string header is judged by its
    length, without a call) and adding up a bound of their JSON's size without
    encoding them. It answers False whenever it cannot tell, for
    `_header_fault` to say what is wrong: a check that fails, or headers whose
    bound is above MAX_HEADERS_SIZE, which that then measures as JSON.
    """
    if headers.get("task") is None or headers.get("id") is None:
        return False
    size = 1  # the braces
    for name, value in headers.items():
        if type(name) is not str:
            return False
        if value is None:
            size += len(name) + NAME_TWELFTHS + SCALAR_TWELFTHS
            continue
        kind = type(value)
        if kind is str:
            size += len(name) + NAME_TWELFTHS + len(value) + 2
            if name in _TEXTS:
                continue
            if name in _IDENTIFIERS:
                if 0 < len(value) <= MAX_ID_LENGTH:
                    continue
                return False
        elif kind in SCALARS and -SMALL_INT < value < SMALL_INT:
            size += len(name) + NAME_TWELFTHS + SCALAR_TWELFTHS
        else:
            size += len(name) + NAME_TWELFTHS + len(repr(value))
        check = _CHECKS.get(name)
        if check is not None and not check(value):
            return False
    return 12 * size <= MAX_HEADERS_SIZE


def _header_fault(headers: Any) -> str | None:
    """What is wrong with headers, each check in turn: the first fault found, or None.

    An int too long to print fails here as in `json.dumps` (ValueError): the
    worker dead-letters such a message as malformed.
    """
    if type(headers) is not dict and not isinstance(headers, Mapping):
        return f"headers are not an object ({type(headers).__name__})"
    for name in REQUIRED_HEADERS:
        if headers.get(name) is None:
            return f"no {name!r} header: not a Celery task message (protocol 2)"
    for name, (check, expected) in HEADER_CHECKS.items():
        value = headers.get(name)
        if value is not None and not check(value):
            return f"header {name!r} must be {expected}, not {preview(value)}"
    if (size := len(json.dumps(headers, default=str))) > MAX_HEADERS_SIZE:
        return f"headers take {size} bytes, more than the {MAX_HEADERS_SIZE} a task message uses"
    return None


def body_problem(payload: Any) -> str | None:
    """What is wrong with a decoded protocol 2 body `[args, kwargs, embed]`, or None."""
    if not isinstance(payload, SEQUENCE) or len(payload) != 3:
        return f"body must be [args, kwargs, embed], not {preview(payload)}"
    args, kwargs, embed = payload
    if not isinstance(args, SEQUENCE):
        return f"args must be a list, not {preview(args)}"
    if not _mapping(kwargs) or (kwargs and not all(type(key) is str for key in kwargs)):
        return f"kwargs must be an object, not {preview(kwargs)}"
    if embed is None:
        return None
    if not _mapping(embed):
        return f"embed must be an object or null, not {preview(embed)}"
    for name in ("callbacks", "errbacks", "chain"):
        value = embed.get(name)
        if value is not None and not (
            isinstance(value, SEQUENCE) and all(_mapping(item) for item in value)
        ):
            return f"embed {name!r} must be a list of signatures, not {preview(value)}"
    chord = embed.get("chord")
    if chord is not None and not _mapping(chord):
        return f"embed 'chord' must be a signature, not {preview(chord)}"
    return None


def message_problem(message: Any, accept: set[str] | None = None) -> tuple[str, str] | None:
    """(reason, what is wrong) for a task message the worker must not run, or None.

    The body is decoded only when its content type is accepted (JSON): pickle
    and other content is refused undecoded. The decoded body stays cached on
    the message, so Celery does not decode it again.
    """
    properties = message.properties or {}
    if properties.get(MALFORMED_PROPERTY):
        return MALFORMED, str(properties[MALFORMED_PROPERTY])
    problem = header_problem(message.headers)
    if problem:
        return MALFORMED, problem
    content_type = message.content_type
    if not content_type:
        return MALFORMED, "no content type"
    if content_type not in (accept or {JSON_CONTENT}):
        from kombu.serialization import registry

        name = registry.type_to_name.get(content_type)
        named = f" ({name})" if name else ""
        return REFUSED, f"content type {preview(content_type)}{named} is not accepted (JSON only)"
    try:
        payload = message.payload
    except Exception as exc:  # any decoding failure: the body is not what it says
        return MALFORMED, f"body is not {content_type}: {type(exc).__name__}: {preview(exc, 200)}"
    problem = body_problem(payload)
    return (MALFORMED, problem) if problem else None


def envelope_problem(payload: Any) -> str | None:
    """What is wrong with a kombu JSON envelope (Redis, SQS), or None."""
    if not isinstance(payload, dict):
        return f"envelope is not an object: {preview(payload)}"
    properties = payload.get("properties")
    if not isinstance(properties, dict):
        return f"envelope has no properties object: {preview(properties)}"
    if not properties.get("delivery_tag"):
        return "envelope has no delivery tag"
    for name, check in PROPERTY_CHECKS.items():
        value = properties.get(name)
        if value is not None and not check(value):
            return f"envelope property {name!r} is invalid: {preview(value)}"
    delivery_info = properties.get("delivery_info") or {}
    for name in ("exchange", "routing_key"):
        value = delivery_info.get(name)
        if value is not None and not isinstance(value, str):
            return f"envelope delivery_info {name!r} is invalid: {preview(value)}"
    for name in ("content-type", "content-encoding"):
        value = payload.get(name)
        if value is not None and not isinstance(value, str):
            return f"envelope {name!r} is invalid: {preview(value)}"
    headers = payload.get("headers")
    if headers is not None and not isinstance(headers, dict):
        return f"envelope headers are not an object: {preview(headers)}"
    body = payload.get("body")
    if body is not None and not isinstance(body, str):
        return f"envelope body is not a string: {preview(body)}"
    if properties.get("body_encoding") == "base64" and body:
        try:
            base64.b64decode(body, validate=True)
        except ValueError:
            return "envelope body is not valid base64"
    return None


def quarantine(raw: bytes | str, queue: str, problem: str) -> dict[str, Any]:
    """A well-formed envelope that carries an unreadable one as its body, and why."""
    data = raw.encode("utf-8", "surrogateescape") if isinstance(raw, str) else raw
    return {
        "body": base64.b64encode(data).decode("ascii"),
        "content-type": "application/octet-stream",
        "content-encoding": "binary",
        "headers": {},
        "properties": {
            "body_encoding": "base64",
            "delivery_tag": str(uuid.uuid4()),
            "delivery_info": {"exchange": queue, "routing_key": queue},
            "priority": 0,
            MALFORMED_PROPERTY: problem,
        },
    }


def readable_envelope(raw: bytes | str, queue: str) -> dict[str, Any]:
    """The envelope as kombu reads it when it is sound, else its quarantine envelope."""
    try:
        text = raw.decode("utf-8") if isinstance(raw, bytes) else raw
        payload = json.loads(text)
    except (UnicodeDecodeError, ValueError) as exc:
        return quarantine(raw, queue, f"envelope is not JSON: {type(exc).__name__}")
    problem = envelope_problem(payload)
    if problem:
        return quarantine(raw, queue, problem)
    return arrived_on(payload, queue)


def arrived_on(payload: dict[str, Any], queue: str) -> dict[str, Any]:
    """The envelope, naming the queue it came from when it does not say (its lane)."""
    properties = payload["properties"]
    delivery_info = properties["delivery_info"] = properties.get("delivery_info") or {}
    delivery_info.setdefault("exchange", queue)
    delivery_info.setdefault("routing_key", queue)
    return payload


def limited(given: Any, ceiling: float | None) -> float | None:
    """A time limit a message asked for, never above the project's own."""
    if given is None or isinstance(given, bool) or not isinstance(given, NUMBER):
        return ceiling
    if ceiling is None:
        return given
    return min(given, ceiling) if given > 0 else ceiling
