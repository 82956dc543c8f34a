"""Where a job goes when it will not succeed: the worker side of dead letters.

Every way a job can end badly is decided here, in the worker's main process:
a failure after the last retry or a hard time limit is dead-lettered; a lost
worker process gives the job back to its lane, until the job has been
delivered TASK_MAX_DELIVERIES times - then it is dead-lettered as well.
Dead-lettering records the job in the broker's dead-letter store first and
acknowledges the original after, so a crash in between duplicates a dead
letter and never loses a job.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from functools import cache
from typing import Any

from billiard.common import human_status
from billiard.einfo import ExceptionInfo, ExceptionWithTraceback
from billiard.exceptions import WorkerLostError
from celery.exceptions import Ignore, Reject, Retry, Terminated, TimeLimitExceeded
from celery.worker.request import Request

from workergen_runtime.deadletter import (
    DELIVERY_LIMIT,
    FAILED,
    REJECTED,
    TIME_LIMIT,
    DeadLetter,
    DeadLetterStore,
    letter_from_message,
    store_for,
)
from workergen_runtime.idempotency import release_dead_lettered
from workergen_runtime.queues import lane_of_queue
from workergen_runtime.signals import dead_lettered, job_dead_lettered
from workergen_runtime.worker.deliveries import (
    await_broker_rules,
    forget_deliveries,
    give_back_requeues,
)
from workergen_runtime.worker.inbound import Intake, intake_of, limited, preview, printable

log = logging.getLogger(__name__)

WORKER_LOST = "worker-lost"


@cache
def dead_letter_store(celery_app: Any) -> DeadLetterStore:
    """The dead-letter store of an app's broker, one per app and process."""
    return store_for(celery_app.settings)


def dead_letter_message(
    celery_app: Any,
    message: Any,
    *,
    reason: str,
    exception: str | None,
    traceback: str | None = None,
    attempts: int = 1,
    decoded: bool = True,
) -> bool:
    """Record a message as a dead letter, then acknowledge it. False when it could not be kept.

    When the store cannot take it, the message is left unacknowledged for the
    caller to requeue or reject, never dropped. Nothing about the message can
    make this raise: it reads the message's intake (inbound.py), and a
    letter that cannot be built from that is built from the raw bytes. With
    `decoded=False` the body is kept as it came and never decoded (a message
    whose handling may be what ended the worker).
    """
    intake = intake_of(message) if decoded else Intake(problem=None, body_read=True)
    try:
        release_dead_lettered(celery_app, message, intake)
    except Exception:  # the key expires by itself; the letter matters more
        log.warning("Idempotency key of %s not released.", printable(intake.task_id), exc_info=True)
    letter = letter_for(celery_app, message, intake, reason, exception, traceback, attempts)
    if not record_with_backoff(celery_app, letter):
        return False
    log.error(
        "Dead-lettered %s[%s] (%s) after %d attempt(s): %s",
        printable(letter.task_name),
        printable(letter.id),
        reason,
        attempts,
        exception,
    )
    dead_lettered.send(sender=None, letter=letter)
    message.ack()
    announce(letter)
    return True


def announce(letter: DeadLetter) -> None:
    """Send `job_dead_lettered` for a stored letter; a receiver that raises is logged, not raised.

    Celery's `send` would log a failing receiver without the letter it failed
    on: each receiver is called here, from the list `send` walks itself
    (`_live_receivers`, Celery's own), and its failure logged once, by id.
    """
    for receiver in job_dead_lettered._live_receivers(None):
        try:
            receiver(
                signal=job_dead_lettered,
                sender=None,
                letter=letter,
                letter_id=letter.id,
                task_id=letter.task_id,
                task_name=letter.task_name,
                reason=letter.reason,
                lane=letter.lane,
                exception=letter.exception,
                attempts=letter.attempts,
            )
        except Exception:
            log.exception(
                "A job_dead_lettered receiver (%s) failed on dead letter %s; the letter is kept.",
                printable(getattr(receiver, "__qualname__", receiver), 200),
                printable(letter.id),
            )


def letter_for(
    celery_app: Any,
    message: Any,
    intake: Intake,
    reason: str,
    exception: str | None,
    traceback: str | None,
    attempts: int,
) -> DeadLetter:
    """The dead letter of a message; from its raw bytes alone when anything else fails."""
    body = message.body if isinstance(message.body, bytes | str) else b""
    try:
        headers = message.headers if isinstance(message.headers, dict) else {}
        delivery = message.delivery_info if isinstance(message.delivery_info, dict) else {}
        first_failed_at = headers.get("first_failed_at")
        return letter_from_message(
            body=body,
            headers=headers,
            content_type=message.content_type,
            content_encoding=message.content_encoding,
            lane=lane_of_queue(delivery.get("routing_key"), celery_app.settings.queue_namespace),
            reason=reason,
            exception=exception,
            traceback=traceback,
            attempts=attempts,
            first_failed_at=first_failed_at if isinstance(first_failed_at, str) else None,
            fallback_id=(message.properties or {}).get("message_id"),
            # Decoded at intake, or never: a body whose headers were refused
            # is decoded here, once and within bounds, so its letter can be replayed.
            call=intake.call if intake.call is not None or intake.body_read else True,
        )
    except Exception as exc:
        log.warning("Dead letter of a message built from its bytes alone: %s", preview(exc))
        return letter_from_message(
            body=body,
            headers=None,
            content_type=None,
            content_encoding=None,
            lane=None,
            reason=reason,
            exception=f"{exception} (its headers could not be kept: {preview(exc)})",
            attempts=attempts,
            call=None,
        )


# A store that fails is tried again a few times, 0.25 s, 0.5 s, then 1 s apart
# (under 2 s in all), then the message is left to the broker: RabbitMQ's
# dead-letter queue, SQS's redrive policy, Redis's lane for another delivery.
RECORD_ATTEMPTS = 4
RECORD_BACKOFF = 0.25


def record_with_backoff(celery_app: Any, letter: DeadLetter) -> bool:
    """Record a dead letter, trying again with backoff; False once every attempt failed."""
    for attempt in range(RECORD_ATTEMPTS):
        try:
            dead_letter_store(celery_app).record(letter)
            return True
        except Exception as exc:
            failure = f"{type(exc).__name__}: {exc}"
        if attempt + 1 < RECORD_ATTEMPTS:
            time.sleep(RECORD_BACKOFF * 2**attempt)
    log.critical(
        "Could not record dead letter %s after %d attempts (%s): left to the broker.",
        letter.id,
        RECORD_ATTEMPTS,
        failure,
    )
    return False


def exit_status(pid: int | None) -> int | None:
    """How a worker process ended: its exit code, or minus the signal that killed it.

    None while it runs, or when that cannot be told (not a child of this
    process, no waitid). The process is only looked at (WNOWAIT): the pool
    still collects it as usual.
    """
    if not pid or not hasattr(os, "waitid"):
        return None
    try:
        ended = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except OSError:
        return None
    if ended is None:
        return None
    return ended.si_status if ended.si_code == os.CLD_EXITED else -ended.si_status


def worker_lost(status: int) -> ExceptionInfo:
    """The error the pool reports for a worker process that ended with this status."""
    try:
        raise WorkerLostError(f"Worker exited prematurely: {human_status(status)}.") from None
    except WorkerLostError:
        return ExceptionInfo()


@cache
def job_time_limits(task: Any) -> tuple[float | None, float | None]:
    """(hard, soft): a job's own time limits, else the project's.

    Read once per job: a lookup in the app's configuration costs more than the
    rest of what the worker adds to a request.
    """
    conf = task.app.conf
    return (
        task.time_limit or conf.task_time_limit,
        task.soft_time_limit or conf.task_soft_time_limit,
    )


class DeadLetterRequest(Request):
    """A task request whose bad endings go to the dead-letter store, never lost or looping."""

    _ending: tuple[str, str | None, str | None] | None = None
    # Whether reject() has begun settling this message. The pool can end one job
    # from two threads at once (its time-out handler and, in a shutdown, the pool's
    # own clean-up): the first settles it, the second must not dead-letter it again.
    _settling = False
    _settle_lock = threading.Lock()  # one for all requests: rejections are rare

    # What the message's `timelimit` header asked for (Celery sets `time_limits`).
    _asked_limits: Any = (None, None)

    @property
    def time_limits(self) -> tuple[float | None, float | None]:
        """(hard, soft): the `timelimit` header may lower the job's limits, never raise them.

        Limits come from the project (TASK_TIME_LIMIT, the job's own). Read once,
        as the job goes to the pool.
        """
        hard, soft = self._asked_limits
        ceiling_hard, ceiling_soft = job_time_limits(self._task)
        return limited(hard, ceiling_hard), limited(soft, ceiling_soft)

    @time_limits.setter
    def time_limits(self, asked: Any) -> None:
        self._asked_limits = asked

    def on_timeout(self, soft: bool, timeout: float) -> None:
        if not soft:
            if self._ending and self._ending[0] == WORKER_LOST:
                return  # Its process was gone before the limit: on_failure gave it back.
            self._ending = (TIME_LIMIT, f"TimeLimitExceeded({timeout})", None)
        super().on_timeout(soft, timeout)

    def on_failure(self, exc_info: Any, send_failed_event: bool = True, return_ok: bool = False):
        exc = exc_info.exception
        if isinstance(exc, ExceptionWithTraceback):
            exc = exc.exc
        if isinstance(exc, TimeLimitExceeded) and (lost := self._lost_process()) is not None:
            exc_info, exc = lost, lost.exception.exc
        if isinstance(exc, TimeLimitExceeded):
            self._ending = (TIME_LIMIT, repr(exc), exc_info.traceback)
        elif isinstance(exc, WorkerLostError | SystemExit | KeyboardInterrupt):
            self._ending = (WORKER_LOST, repr(exc), None)
        elif not isinstance(exc, Retry | Ignore | Terminated | Reject):
            self._ending = (FAILED, f"{type(exc).__name__}: {exc}", exc_info.traceback)
        return super().on_failure(
            exc_info, send_failed_event=send_failed_event, return_ok=return_ok
        )

    def reject(self, requeue: bool = False) -> None:
        with self._settle_lock:
            if self.acknowledged or self._settling:
                return
            self._settling = True
        reason, exception, traceback = self._ending or (REJECTED, None, None)
        if requeue and reason == WORKER_LOST:
            deliveries = getattr(self._message, "deliveries", None)
            if deliveries is None or deliveries < self.app.settings.task_max_deliveries:
                # Another delivery may succeed (or the broker counts, on quorum queues).
                return self._broker_reject(requeue=give_back_requeues(self.app.settings))
            reason = DELIVERY_LIMIT
            exception = (
                f"The worker process running it was lost on each of {deliveries} deliveries "
                f"({exception})."
            )
        elif requeue and reason != TIME_LIMIT:
            # The job asked for it: Reject(requeue=True).
            return self._broker_reject(requeue=give_back_requeues(self.app.settings))
        self._dead_letter(reason, exception, traceback)

    def _broker_reject(self, requeue: bool) -> None:
        """Hand the message back to the broker, once its dead-letter rules are in place."""
        await_broker_rules()
        super().reject(requeue=requeue)

    def _announce_cancelled(self, *args: Any, **kwargs: Any) -> None:
        # Cancelled because the broker connection was lost: the message stays
        # unacknowledged and comes back. Marked first, so a result backend that
        # went down with the broker (storing the RETRY state fails) cannot turn
        # the cancel into a revoke, which would acknowledge the job: lost.
        # Celery's arguments are passed on as given: 5.5.0 takes none, later
        # releases take `emit_retry`.
        self._already_cancelled = True
        try:
            super()._announce_cancelled(*args, **kwargs)
        except Exception as exc:  # any result backend error; the job is given back anyway
            log.warning(
                "%s[%s] cancelled after the connection loss; its state was not stored: %s",
                self.name,
                self.id,
                exc,
            )

    def acknowledge(self) -> None:
        if not self.acknowledged:
            forget_deliveries(self.app, self._message)
        super().acknowledge()

    def _lost_process(self) -> ExceptionInfo | None:
        """A WorkerLostError when the job's process had exited before its hard time limit.

        The pool can notice a dead process seconds late (it may look before the
        process can be collected, and then only every few seconds), so the hard
        limit can come first. Such a job did not run past its limit: its process
        was lost, which redelivery and TASK_MAX_DELIVERIES deal with.
        """
        status = exit_status(self.worker_pid)
        if status is None:
            return None
        log.warning(
            "%s[%s] reached its hard time limit after its worker process had exited (%s): "
            "handled as a lost worker process.",
            self.name,
            self.id,
            human_status(status),
        )
        return worker_lost(status)

    def _attempts(self) -> int:
        if self._ending and self._ending[0] == WORKER_LOST:
            return int(getattr(self._message, "deliveries", None) or 1)
        return int(self._request_dict.get("retries") or 0) + 1

    def _dead_letter(self, reason: str, exception: str | None, traceback: str | None) -> None:
        if dead_letter_message(
            self.app,
            self._message,
            reason=reason,
            exception=exception,
            traceback=traceback,
            attempts=self._attempts(),
        ):
            self.acknowledged = True
            forget_deliveries(self.app, self._message)
            self.send_event("task-rejected", requeue=False)
        elif self.app.settings.broker_kind == "amqp":
            # The broker routes it to the lane's dead-letter queue itself.
            self._broker_reject(requeue=False)
        else:
            # Back for the store to take it later; the worker did not die on it.
            forget_deliveries(self.app, self._message)
            self._broker_reject(requeue=give_back_requeues(self.app.settings))
