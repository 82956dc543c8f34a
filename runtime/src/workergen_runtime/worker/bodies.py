"""A message body, read within bounds: the one way the worker and `dlq` decode a body.

A body comes from whoever could write to the broker. JSON nested thousands
deep makes the decoder (and everything that walks the value after it: the
pool's pickling, a repr, a dead letter's record) raise RecursionError; a huge
one holds a worker's memory. Every body is therefore decoded here, once, with
a bound on its size and on its depth, and what fails a bound is refused with a
reason, as any other body that is not JSON.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from typing import Any

# What a task message's body may take. Larger: refused at intake, and a dead
# letter keeps a preview of it only (not replayable).
MAX_BODY_BYTES = 1024 * 1024
# How deep lists and objects may nest. A Celery body with a chain or chord in
# its embed nests well under 20; arguments as deep as this are not a job's.
MAX_BODY_DEPTH = 64

CONTAINERS = (list, tuple, dict)


class BodyError(ValueError):
    """A body that cannot be read within the bounds: the text says why."""


def nested_deeper(value: Any, limit: int = MAX_BODY_DEPTH) -> bool:
    """Whether lists and objects nest more than `limit` levels in `value` (no recursion)."""
    if not isinstance(value, CONTAINERS):
        return False
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > limit:
            return True
        children = item.values() if isinstance(item, dict) else item
        stack.extend((child, depth + 1) for child in children if isinstance(child, CONTAINERS))
    return False


def _may_nest_deeper(raw: bytes | str, limit: int) -> bool:
    """False when the text has too few brackets to nest deeper than `limit` (most bodies)."""
    if isinstance(raw, str):
        return raw.count("[") + raw.count("{") > limit
    return raw.count(b"[") + raw.count(b"{") > limit


def decode_bounded(
    raw: bytes | str,
    decode: Callable[[], Any] | None = None,
    *,
    max_bytes: int = MAX_BODY_BYTES,
    max_depth: int = MAX_BODY_DEPTH,
) -> Any:
    """The value of a JSON text within the bounds; raises BodyError saying what is wrong.

    `decode` reads the text (kombu's decoder for a message, so its JSON types
    come back as they were sent); plain `json.loads` when not given.
    """
    if not isinstance(raw, bytes | bytearray | memoryview | str):
        raise BodyError(f"body is not text or bytes ({type(raw).__name__})")
    size = len(raw)
    if size > max_bytes:
        raise BodyError(f"body takes {size} bytes, more than the {max_bytes} allowed")
    try:
        value = decode() if decode is not None else json.loads(raw)
    except RecursionError:
        raise BodyError(f"body nests deeper than {max_depth} levels") from None
    except Exception as exc:  # any decoder's failure: the body is not what it says
        text = str(exc)
        text = text if len(text) <= 200 else text[:200] + "..."
        raise BodyError(f"body is not application/json: {type(exc).__name__}: {text}") from None
    if _may_nest_deeper(raw, max_depth) and nested_deeper(value, max_depth):
        raise BodyError(f"body nests deeper than {max_depth} levels")
    return value


def message_body(message: Any) -> Any:
    """A message's decoded body within the bounds, decoded once and kept on the message.

    kombu keeps what it decoded (`message.payload`), so Celery and everything
    after the check read that value, never the text again.
    """
    raw = message.body
    if isinstance(raw, memoryview):
        raw = raw.tobytes()
    return decode_bounded(raw if raw is not None else b"", lambda: message.payload)


def body_digest(body: Any) -> str:
    """A short, stable name for a body's bytes: the id of a message that carries none."""
    if isinstance(body, str):
        raw = body.encode("utf-8", "surrogateescape")
    elif isinstance(body, bytes | bytearray | memoryview):
        raw = bytes(body)
    else:
        raw = b""
    return "body-" + hashlib.sha1(raw, usedforsecurity=False).hexdigest()[:16]
