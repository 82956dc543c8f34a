"""How far ahead a job may be delayed (TASK_MAX_ETA), by one pure rule.

A worker holds a message with an eta unacknowledged until it is due. Held for
days, it takes a slot that other jobs need (RabbitMQ quorum lanes reserve a
fixed number per worker), Redis and SQS hand it to a second worker once
VISIBILITY_TIMEOUT passes, and RabbitMQ closes the channel of a consumer that
keeps a message past its consumer timeout. So a message further ahead than
TASK_MAX_ETA when it arrives is dead-lettered as `malformed` instead.

On RabbitMQ quorum lanes a job dispatched with a countdown travels through
Celery's delayed-delivery exchanges and arrives when it is due, so only a
message put on the lane with a far eta meets the bound there.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

from workergen_runtime.settings import Settings


def seconds_ahead(value: Any, now: datetime, timezone: str) -> float | None:
    """How many seconds `value` (an eta: ISO 8601 text or a datetime) is after `now`.

    None when there is no eta or it cannot be read (the message checks report
    that). A naive time is in TIMEZONE, as Celery reads it.
    """
    if value is None:
        return None
    if isinstance(value, str):
        from celery.utils.time import maybe_iso8601

        try:
            value = maybe_iso8601(value)
        except (AttributeError, ValueError, TypeError, OverflowError):
            return None
    if not isinstance(value, datetime):
        return None
    if value.tzinfo is None:
        value = value.replace(tzinfo=ZoneInfo(timezone))
    try:
        return (value - now).total_seconds()
    except OverflowError:
        return None


def eta_problem(value: Any, now: datetime, settings: Settings) -> str | None:
    """Why a message with this eta is not held for its worker, or None when it may be."""
    ahead = seconds_ahead(value, now, settings.timezone)
    if ahead is None:
        return None
    limit = settings.effective_task_max_eta
    if ahead <= limit:
        return None
    return (
        f"its eta {_shown(value)} is {ahead:.0f} s ahead, beyond TASK_MAX_ETA ({limit} s): "
        "a worker would hold it unacknowledged until then. Send it with a shorter countdown, "
        "or raise TASK_MAX_ETA"
    )


def _shown(value: Any) -> str:
    """The eta as a dead letter's reason shows it: short, quoted, control characters escaped."""
    text = value.isoformat() if isinstance(value, datetime) else str(value)
    return repr(text[:40])
