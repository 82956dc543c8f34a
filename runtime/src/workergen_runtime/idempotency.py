"""Idempotent jobs: a key whose work ran (or runs) is not run again by a duplicate delivery.

States in Redis at LOCK_URL under `idempotency:<namespace>.<task>:<key>`:

- `running@<host>/<pid>/<start>:<task id>:<attempt>` while a delivery works on it. The
  holder is the worker process: its host (hostname and PID namespace), pid and start time
  (Linux; empty elsewhere). The TTL outlasts the hard time limit and the longest retry wait,
  so any claim expires in the end.
- `retrying:<task id>:<attempt>` once that attempt asked for a retry: a later attempt of the
  same task id continues the work; anything else is a duplicate.
- `done` for IDEMPOTENCY_RETENTION seconds after success: duplicates are skipped.
- deleted when the job fails for good or is dead-lettered, so the work may run again
  (a `dlq replay` too).

A delivery that finds the key running under its own task id and attempt is either a
duplicate of a delivery still at work (Redis or SQS handing out a message twice) or a
redelivery after the worker process died: late acknowledgement gives a message back when
its process is killed, and the claim is still there. Which one it is depends on the holder:

- on this host and gone (or its pid now belongs to a newer process): the work was lost. The
  delivery takes the claim over - compare-and-set, so only one redelivery does - and runs.
- alive on this host: a duplicate, skipped. A holder that is this very process counts as
  alive only while this process runs that claim (thread and gevent pools).
- on another host, whose processes cannot be checked from here, or a claim that names no
  holder (written before holders were recorded): deferred. The same message (same task id
  and attempt) is published again to arrive when the claim expires, and this delivery ends
  as a retry does. By then the holder has finished (`done`: skipped), retried (a later
  attempt holds it: skipped), or died and its claim expired (the copy runs). Giving the
  message back to the broker instead would bring it straight back, over and over until the
  claim expires, each time counting towards TASK_MAX_DELIVERIES; `task.retry` would spend a
  retry and back off as if the job had failed, though nothing did.
"""

from __future__ import annotations

import contextlib
import enum
import hashlib
import json
import logging
import math
import threading
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from celery.exceptions import Retry

from workergen_runtime.queues import qualified_queue
from workergen_runtime.signals import duplicate_skipped
from workergen_runtime.worker.inbound import Intake
from workergen_runtime.worker.processes import Holder, process_alive, this_process

if TYPE_CHECKING:
    import redis

log = logging.getLogger(__name__)

HEADER = "idempotency_key"
DONE = "done"
RUNNING = "running"
RETRYING = "retrying"
CLAIM_MARGIN = 60
# Rounds of compare-and-set before a delivery gives up on a key others keep changing.
CLAIM_ROUNDS = 3


def derive_key(task_name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
    """A stable hash of the task name and its JSON arguments."""
    payload = json.dumps([task_name, list(args), kwargs], sort_keys=True, default=str)
    return hashlib.sha256(payload.encode()).hexdigest()


def storage_key(task_name: str, key: str, namespace: str) -> str:
    return f"idempotency:{qualified_queue(task_name, namespace)}:{key}"


def job_key(
    task_name: str,
    namespace: str,
    explicit: str | None,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
) -> str:
    """Where a job's state lives: under its explicit key, else a hash of its arguments."""
    return storage_key(task_name, explicit or derive_key(task_name, args, kwargs), namespace)


def explicit_key(request: Any) -> str | None:
    """The key given with `dispatch_with(idempotency_key=...)`, if any."""
    found = getattr(request, HEADER, None)
    if found is None and isinstance(getattr(request, "headers", None), dict):
        found = request.headers.get(HEADER)
    return str(found) if found is not None else None


@dataclass(frozen=True)
class Claim:
    """A key's `running` or `retrying` state."""

    state: str
    task_id: str
    attempt: int
    holder: Holder | None = None

    def __str__(self) -> str:
        head = f"{self.state}@{self.holder}" if self.holder else self.state
        return f"{head}:{self.task_id}:{self.attempt}"

    @classmethod
    def parse(cls, value: str) -> Claim | None:
        """Read a claim; the task id may hold colons. None when it is not a claim."""
        head, _, rest = value.partition(":")
        task_id, _, attempt = rest.rpartition(":")
        state, at, holder_text = head.partition("@")
        holder = Holder.parse(holder_text) if at else None
        if state not in (RUNNING, RETRYING) or not attempt.isdigit() or (at and not holder):
            return None
        return cls(state, task_id, int(attempt), holder)


class Verdict(enum.Enum):
    """What a delivery does with a key it could not simply claim."""

    CONTINUE = "continue"  # a later attempt of the claiming delivery
    TAKE_OVER = "take over"  # the claiming process is gone
    DEFER = "defer"  # held on another host: come back when the claim expires
    DONE = "done"  # skip
    BUSY = "being worked on"  # skip


def decide(
    value: str,
    task_id: str,
    attempt: int,
    *,
    me: Holder,
    running_here: Collection[str] = (),
    alive: Callable[[Holder], bool | None] = process_alive,
) -> Verdict:
    """The verdict for delivery (`task_id`, `attempt`) on a key holding `value`."""
    if value == DONE:
        return Verdict.DONE
    claim = Claim.parse(value)
    if claim is None or claim.task_id != task_id or claim.attempt > attempt:
        return Verdict.BUSY
    if claim.attempt < attempt:
        return Verdict.CONTINUE
    if claim.state == RETRYING:
        return Verdict.BUSY  # this attempt already ended; its retry carries on
    if claim.holder is None:
        return Verdict.DEFER
    if claim.holder == me:
        return Verdict.BUSY if value in running_here else Verdict.TAKE_OVER
    holder_alive = alive(claim.holder)
    if holder_alive is None:
        return Verdict.DEFER
    return Verdict.BUSY if holder_alive else Verdict.TAKE_OVER


# The claims this process is running now: a claim naming this process is alive only here.
# Claiming and recording happen under one lock, so a thread never sees a claim of this
# process that is not recorded yet.
_running_here: set[str] = set()
_claiming = threading.Lock()


def run_once(
    task: Any, args: tuple[Any, ...], kwargs: dict[str, Any], run: Callable[[], Any]
) -> Any:
    """Run `run()` unless this key's work is done or another delivery is working on it."""
    import redis

    from workergen_runtime.locks import delete_if_held, lock_client, replace_if_held

    settings = task.app.settings
    request = task.request
    task_id, attempt = str(request.id), request.retries or 0
    key = job_key(task.name, settings.queue_namespace, explicit_key(request), args, kwargs)
    claim = str(Claim(RUNNING, task_id, attempt, this_process()))
    ttl = (
        (task.time_limit or settings.task_time_limit)
        + settings.task_retry_backoff_max
        + CLAIM_MARGIN
    )
    client = lock_client(settings)
    with _claiming:
        if not _claim(task, client, key, claim, ttl):
            return None
        _running_here.add(claim)
    try:
        result = run()
    except Retry:
        # The claim waits for the retry, unless the retry already took it. The retry is
        # queued already: a Redis error here must not fail this delivery as well.
        with contextlib.suppress(redis.RedisError):
            replace_if_held(client, key, claim, str(Claim(RETRYING, task_id, attempt)), ttl)
        raise
    except BaseException:
        delete_if_held(client, key, claim)
        raise
    finally:
        _running_here.discard(claim)
    client.set(key, DONE, ex=settings.idempotency_retention)
    return result


def release_dead_lettered(celery_app: Any, message: Any, intake: Intake) -> None:
    """A dead-lettered job's work did not happen: free the key it still claims.

    A job whose process died (hard time limit, crash on every delivery) cannot
    release its own claim; without this, a `dlq replay` (a new task id) would be
    skipped as a duplicate until the claim expired. Only a claim of this task id
    is deleted, and only if unchanged: `done` or another delivery's claim stays.
    Only what the intake took is read (a sound task name, the decoded call):
    a message it refused claimed nothing, since it never ran.
    """
    task = celery_app.tasks.get(intake.task) if intake.task else None
    if not getattr(task, "idempotent", False) or intake.call is None:
        return
    task_id = intake.task_id
    args, kwargs = intake.call
    import redis

    from workergen_runtime.locks import delete_if_held, lock_client

    settings = celery_app.settings
    key = job_key(
        task.name, settings.queue_namespace, explicit_key(message), tuple(args), dict(kwargs)
    )
    client = lock_client(settings)
    try:
        found = client.get(key)
        value = found.decode() if found is not None else ""
        claim = Claim.parse(value)
        if claim is not None and claim.task_id == task_id:
            delete_if_held(client, key, value)
    except redis.RedisError as exc:  # the claim expires by itself
        log.warning("idempotency key %s of a dead-lettered job not released: %s", key, exc)


def _claim(task: Any, client: redis.Redis, key: str, claim: str, ttl: int) -> bool:
    """Claim `key` for this delivery: True to run, False to skip; a deferral raises Retry."""
    from workergen_runtime.locks import replace_if_held

    request = task.request
    for _ in range(CLAIM_ROUNDS):
        if client.set(key, claim, nx=True, ex=ttl):
            return True
        found, remaining_ms = client.pipeline().get(key).pttl(key).execute()
        if found is None:
            continue  # it expired meanwhile
        value = found.decode()
        verdict = decide(
            value,
            str(request.id),
            request.retries or 0,
            me=this_process(),
            running_here=_running_here,
        )
        if verdict in (Verdict.DONE, Verdict.BUSY):
            break
        if verdict is Verdict.DEFER:
            countdown = math.ceil(remaining_ms / 1000) + 1 if remaining_ms > 0 else ttl
            reason = (
                f"key {key} is held by {value}, which cannot be checked from this host; "
                f"coming back in {countdown} s, when that claim expires"
            )
            log.warning("idempotent job %s deferred: %s", task.name, reason)
            task.redeliver_later(countdown, reason)
        if replace_if_held(client, key, value, claim, ttl):
            if verdict is Verdict.TAKE_OVER:
                log.warning(
                    "idempotent job %s: took over key %s from a lost worker process (%s); "
                    "running it again",
                    task.name,
                    key,
                    value,
                )
            return True
        # Another delivery changed the key first: look again.
    else:
        verdict = Verdict.BUSY
    log.warning("idempotent job %s skipped: key %s is %s", task.name, key, verdict.value)
    duplicate_skipped.send(sender=task, task=task, key=key)
    return False
