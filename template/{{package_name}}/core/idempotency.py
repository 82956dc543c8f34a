"""Idempotent jobs: a key whose work ran (or runs) is not run again by a duplicate delivery.

States in Redis at LOCK_URL under `idempotency:<namespace>.<task>:<key>`:
`running:<task id>:<retry>` while a delivery works on it (TTL above the hard time limit, so a
dead worker's claim expires), then `done` for IDEMPOTENCY_RETENTION seconds. A failure for good
deletes the key, so the work may run again.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable
from typing import Any

from celery.exceptions import Retry

from .queues import qualified_queue
from .settings import get_settings

log = logging.getLogger(__name__)

HEADER = "idempotency_key"
DONE = "done"
CLAIM_MARGIN = 60


def derive_key(task_name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
    """A stable hash of the task name and its JSON arguments."""
    payload = json.dumps([task_name, list(args), kwargs], sort_keys=True, default=str)
    return hashlib.sha256(payload.encode()).hexdigest()


def storage_key(task_name: str, key: str) -> str:
    return f"idempotency:{qualified_queue(task_name)}:{key}"


def explicit_key(request: Any) -> str | None:
    """The key given with `dispatch_with(idempotency_key=...)`, if any."""
    found = getattr(request, HEADER, None)
    if found is None and isinstance(getattr(request, "headers", None), dict):
        found = request.headers.get(HEADER)
    return str(found) if found is not None else None


def run_once(
    task: Any, args: tuple[Any, ...], kwargs: dict[str, Any], run: Callable[[], Any]
) -> Any:
    """Run `run()` unless this key's work is done or another delivery is working on it."""
    from .locks import lock_client

    settings = get_settings()
    request = task.request
    key = storage_key(task.name, explicit_key(request) or derive_key(task.name, args, kwargs))
    claim = f"running:{request.id}:{request.retries or 0}"
    ttl = (
        (task.time_limit or settings.task_time_limit)
        + settings.task_retry_backoff_max
        + CLAIM_MARGIN
    )
    client = lock_client()
    if not client.set(key, claim, nx=True, ex=ttl):
        state = (client.get(key) or b"").decode()
        holder = state.split(":")
        # A retry of the claiming delivery (same task id, later attempt) goes on.
        is_retry = (
            len(holder) == 3
            and holder[1] == str(request.id)
            and int(holder[2]) < (request.retries or 0)
        )
        if not is_retry:
            log.warning(
                "idempotent job %s skipped: key %s is %s",
                task.name,
                key,
                "done" if state == DONE else "being worked on",
            )
            return None
        client.set(key, claim, ex=ttl)
    try:
        result = run()
    except Retry:
        raise  # the claim stays: the retry continues this delivery's work
    except BaseException:
        client.delete(key)
        raise
    client.set(key, DONE, ex=settings.idempotency_retention)
    return result
