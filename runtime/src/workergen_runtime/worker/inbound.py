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
import contextlib
import json
import uuid
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from workergen_runtime.deadletter import MALFORMED, REFUSED
from workergen_runtime.worker.bodies import BodyError, message_body, nested_deeper

# Envelope property of a quarantined message: what made it unreadable.
MALFORMED_PROPERTY = "malformed"
JSON_CONTENT = "application/json"

# Celery's own headers are short (argsrepr/kwargsrepr are cut at 1 KiB); a
# message whose headers take more than this is not a task message.
MAX_HEADERS_SIZE = 32 * 1024
MAX_ID_LENGTH = 255
MAX_NAME_LENGTH = 255
# Celery's headers nest two levels at most (`stamps`); deeper is not a task message.
MAX_HEADER_DEPTH = 8
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
        # An empty string reads as no date at all, which Celery's request fails on.
        return maybe_iso8601(value) is not None
    except (AttributeError, ValueError, TypeError, OverflowError):
        return False


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
    """A short, printable repr of a hostile value, for a dead letter's reason or a log line.

    Never raises: a value nested too deep to print is named by its type. The
    repr escapes control characters, so a log line cannot be forged with it.
    """
    try:
        text = repr(value)
    except Exception:  # RecursionError, or a repr that fails
        return f"<{type(value).__name__} that cannot be printed>"
    return text if len(text) <= limit else text[:limit] + "..."


def printable(value: Any, limit: int = 80) -> str:
    """A name or id for a log line: as it is when it is printable text, else its preview."""
    if isinstance(value, str) and value.isprintable() and len(value) <= limit:
        return value
    return preview(value, limit)


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
            if nested_deeper(value, MAX_HEADER_DEPTH):
                return False
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
    if not all(type(name) is str for name in headers):
        names = [name for name in headers if type(name) is not str]
        return f"header names must be strings, not {preview(names)}"
    for name, value in headers.items():
        if nested_deeper(value, MAX_HEADER_DEPTH):
            return f"header {name!r} nests deeper than {MAX_HEADER_DEPTH} levels"
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


def body_problem(payload: Any, queues: Collection[str] | None = None) -> str | None:
    """What is wrong with a decoded protocol 2 body `[args, kwargs, embed]`, or None.

    `queues`: the project's queues, the only ones the signatures of its embed
    may send to (None: any name, for a check without a project at hand).
    """
    if not isinstance(payload, SEQUENCE) or len(payload) != 3:
        return f"body must be [args, kwargs, embed], not {preview(payload)}"
    args, kwargs, embed = payload
    if not isinstance(args, SEQUENCE):
        return f"args must be a list, not {preview(args)}"
    if not _keyword_arguments(kwargs):
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
    return _signatures_problem(
        [
            (f"embed {name!r}", signature)
            for name in ("callbacks", "errbacks", "chain")
            for signature in embed.get(name) or ()
        ]
        + ([("embed 'chord'", chord)] if chord is not None else []),
        queues,
    )


def _keyword_arguments(value: Any) -> bool:
    return _mapping(value) and all(type(key) is str for key in value)


def _signature_or_list(value: Any) -> bool:
    return _mapping(value) or (isinstance(value, SEQUENCE) and all(_mapping(v) for v in value))


def _held(value: Any) -> list[Any]:
    """The signatures a value holds: itself, or the items of its list."""
    return [value] if _mapping(value) else list(value)


def _scalar(value: Any) -> bool:
    return value is None or isinstance(value, str | int | float)


# The options Celery puts in a signature (and `apply_async` reads when it sends
# one after the job), and what each must be. An option not listed must be a
# plain scalar: whatever else `apply_async` would fail on after the job ran.
SIGNATURE_OPTION_CHECKS: dict[str, tuple[Callable[[Any], bool], str]] = {
    "task_id": (_identifier, "an id string"),
    "group_id": (_identifier, "an id string"),
    "root_id": (_identifier, "an id string"),
    "parent_id": (_identifier, "an id string"),
    "reply_to": (_text, "a string"),
    "queue": (_identifier, "a queue name"),
    "routing_key": (_text, "a string"),
    "exchange": (_text, "a string"),
    "priority": (_count, "a non-negative integer"),
    "group_index": (_count, "a non-negative integer"),
    "retries": (_count, "a non-negative integer"),
    "countdown": (_limit, "a non-negative number"),
    "eta": (_time, "an ISO 8601 date and time"),
    "expires": (lambda v: _limit(v) or _time(v), "a number of seconds or a date and time"),
    "time_limit": (_limit, "a non-negative number"),
    "soft_time_limit": (_limit, "a non-negative number"),
    "shadow": (_text, "a string"),
    "ignore_result": (_flag, "true or false"),
    "immutable": (_flag, "true or false"),
    "headers": (_mapping, "an object"),
    "stamped_headers": (_texts, "a list of strings"),
    "stamps": (_mapping, "an object"),
    "retry_policy": (_mapping, "an object"),
    "link": (_signature_or_list, "a signature or a list of signatures"),
    "link_error": (_signature_or_list, "a signature or a list of signatures"),
    "chord": (_mapping, "a signature"),
}
# The kinds of signature Celery reads from a message, and where each keeps the
# signatures it holds (in its kwargs).
SUBTASK_TYPES = {
    None: (),
    "chain": ("tasks",),
    "group": ("tasks",),
    "chord": ("header", "body"),
    "chunks": ("task",),
    "xmap": ("task",),
    "xstarmap": ("task",),
}


# Options that name where a signature's message goes: within the project only.
ROUTING_OPTIONS = ("queue", "routing_key", "exchange")


def _signatures_problem(found: list[tuple[str, Any]], queues: Collection[str] | None) -> str | None:
    """What is wrong with the signatures of an embed, and every one they hold, or None.

    Celery reads them only after the job ran (to send the next job of a chain,
    a callback or an errback), where a wrong type would fail a job that
    succeeded and a replay would run it again. So each is checked before.
    """
    while found:
        where, signature = found.pop()
        if not _mapping(signature):
            return f"{where} must be a signature, not {preview(signature)}"
        task = signature.get("task")
        if not _identifier(task):
            return f"{where} 'task' must be {HEADER_CHECKS['task'][1]}, not {preview(task)}"
        where = f"{where} ({preview(task, 40)})"
        args, kwargs = signature.get("args"), signature.get("kwargs")
        if args is not None and not isinstance(args, SEQUENCE):
            return f"{where} args must be a list, not {preview(args)}"
        if kwargs is not None and not _keyword_arguments(kwargs):
            return f"{where} kwargs must be an object, not {preview(kwargs)}"
        kind = signature.get("subtask_type")
        if not isinstance(kind, str | None) or kind not in SUBTASK_TYPES:
            return f"{where} subtask_type must be one of Celery's, not {preview(kind)}"
        immutable = signature.get("immutable")
        if immutable is not None and not _flag(immutable):
            return f"{where} immutable must be true or false, not {preview(immutable)}"
        options = signature.get("options")
        if options is not None:
            if not _keyword_arguments(options):
                return f"{where} options must be an object, not {preview(options)}"
            for name, value in options.items():
                check, expected = SIGNATURE_OPTION_CHECKS.get(name, (_scalar, "a plain value"))
                if value is not None and not check(value):
                    return f"{where} option {name!r} must be {expected}, not {preview(value)}"
                if name in ROUTING_OPTIONS and value and queues is not None and value not in queues:
                    elsewhere = preview(value)
                    return f"{where} option {name!r} names a queue of another project: {elsewhere}"
                if name in ("link", "link_error", "chord") and value is not None:
                    found.extend((f"{where} option {name!r}", item) for item in _held(value))
        for name in SUBTASK_TYPES[kind]:
            held = (kwargs or {}).get(name)
            if held is None and kind == "chord" and name == "body":
                continue
            if not _signature_or_list(held):
                expected = "a signature or a list of signatures"
                return f"{where} {name!r} must be {expected}, not {preview(held)}"
            found.extend((f"{where} {name!r}", item) for item in _held(held))
    return None


def message_problem(message: Any, accept: set[str] | None = None) -> tuple[str, str] | None:
    """(reason, what is wrong) for a task message the worker must not run, or None."""
    return take_in(message, accept).problem


@dataclass(frozen=True)
class Intake:
    """What the worker took from a message, once, at its intake: the rest reads this.

    `task` and `task_id` are the headers when they are sound (else None), and
    `call` the decoded (args, kwargs) when the body was read and sound: a
    dead letter, an idempotency key or a metric never reads the raw message.
    `body_read` says the body was decoded (or tried): it is never decoded again.
    """

    problem: tuple[str, str] | None
    task: str | None = None
    task_id: str | None = None
    call: tuple[list[Any], dict[str, Any]] | None = None
    body_read: bool = False


def take_in(
    message: Any, accept: set[str] | None = None, queues: Collection[str] | None = None
) -> Intake:
    """The intake of a message: its checks, and what they read. Never raises.

    The body is decoded only when its content type is accepted (JSON): pickle
    and other content is refused undecoded. It is decoded once, within the
    bounds of bodies.py, and stays on the message, so Celery and the
    dead-letter path read that value and never decode the text again.
    """
    body_read = False
    call = None
    try:
        problem = _envelope_problem(message, accept)
        if problem is None:
            body_read = True
            payload = message_body(message)
            body = body_problem(payload, queues)
            problem = (MALFORMED, body) if body else None
            if problem is None:
                call = list(payload[0]), dict(payload[1])
    except BodyError as exc:
        problem = MALFORMED, str(exc)
    except Exception as exc:  # a check that failed on a value no one foresaw
        problem = MALFORMED, f"the worker could not read it: {type(exc).__name__}: {preview(exc)}"
    headers = message.headers if type(message.headers) is dict else {}
    task, task_id = headers.get("task"), headers.get("id")
    return Intake(
        problem=problem,
        task=task if _identifier(task) else None,
        task_id=task_id if _identifier(task_id) else None,
        call=call,
        body_read=body_read,
    )


def _envelope_problem(message: Any, accept: set[str] | None) -> tuple[str, str] | None:
    """What is wrong before the body: the envelope, the headers, the content type."""
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
    return None


INTAKE_ATTRIBUTE = "intake"


def intake_of(message: Any) -> Intake:
    """The intake recorded on a message as the worker took it, else a new one (never raises)."""
    known = getattr(message, INTAKE_ATTRIBUTE, None)
    if isinstance(known, Intake):
        return known
    intake = take_in(message)
    # A stand-in without room for it computes it again next time.
    with contextlib.suppress(AttributeError):
        setattr(message, INTAKE_ATTRIBUTE, intake)
    return intake


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
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
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
