"""The @job decorator and the Job base class behind every job."""

from __future__ import annotations

import functools
import inspect
import logging
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, NoReturn

from celery import Task
from celery.exceptions import Retry
from celery.result import AsyncResult

from workergen_runtime import project
from workergen_runtime.celery_app import app
from workergen_runtime.deadletter import utcnow
from workergen_runtime.delays import seconds_ahead
from workergen_runtime.dispatch import send
from workergen_runtime.errors import DelayTooLongError, JobArgumentsError
from workergen_runtime.queues import DEFAULT_LANE, check_lane, lane_of_queue, qualified_queue
from workergen_runtime.retry import retry_policy

log = logging.getLogger(__name__)

# How much of a job's arguments its message shows as text (logs, events, Flower):
# Celery's own limit.
ARGUMENTS_SHOWN = 1024


def shown(value: Any) -> str:
    """The arguments as the message shows them: their repr, cut to ARGUMENTS_SHOWN.

    Celery's own text of them walks the arguments in Python, item by item: for
    a job's few JSON values the builtin repr costs a tenth of it.
    """
    text = repr(value)
    return text if len(text) <= ARGUMENTS_SHOWN else text[: ARGUMENTS_SHOWN - 3] + "..."


class Job(Task):
    """A Celery task that knows its lane and dispatches through broker_guard."""

    abstract = True
    lane: str = DEFAULT_LANE
    idempotent: bool = False
    # Failures, hard time limits and lost workers end in the dead-letter store.
    Request = "workergen_runtime.deadletter.routing:DeadLetterRequest"

    def retry(self, *args: Any, **options: Any) -> Any:
        """Retry, carrying the time of the first failure to the job's dead letter."""
        headers = dict(self.request.headers or {})
        headers.setdefault("first_failed_at", self.request.get("first_failed_at") or utcnow())
        options["headers"] = {**headers, **options.get("headers", {})}
        try:
            return super().retry(*args, **self._back_on_its_lane(options))
        except Retry as retry:
            log.info(
                "retry %d of %s %s: %s",
                self.request.retries + 1,
                self.max_retries if self.max_retries is not None else "unlimited",
                retry.humanize(),
                retry.exc if retry.exc is not None else retry.message,
            )
            raise

    def redeliver_later(self, countdown: int, reason: str) -> NoReturn:
        """End this delivery as a retry does, with the same message sent again in `countdown` s.

        Unlike `retry`, nothing failed: the copy keeps this delivery's task id and
        retry number, and counts against no retry limit.
        """
        # Never further ahead than a worker holds a message: if the reason still
        # stands when the copy arrives, it is sent again.
        countdown = min(countdown, self.app.settings.effective_task_max_eta)
        again = self.signature_from_request(countdown=countdown, **self._back_on_its_lane({}))
        if not self.request.is_eager:
            again.apply_async()
        raise Retry(reason, when=countdown, sig=again)

    def _back_on_its_lane(self, options: dict[str, Any]) -> dict[str, Any]:
        """Send the copy to the lane the delivery came from.

        It may have been dispatched to another lane than the job's own, and
        delayed routing keys carry a prefix.
        """
        namespace = self.app.settings.queue_namespace
        lane = lane_of_queue((self.request.delivery_info or {}).get("routing_key"), namespace)
        if lane and "queue" not in options:
            options["queue"] = qualified_queue(lane, namespace)
        return options

    def dispatch(self, *args: Any, **kwargs: Any) -> AsyncResult:
        """Queue the job on its lane; raises QueueUnavailableError when the broker is down."""
        return self.dispatch_with(args=args, kwargs=kwargs)

    def dispatch_with(
        self,
        *,
        args: tuple[Any, ...] | list[Any] = (),
        kwargs: dict[str, Any] | None = None,
        lane: str | None = None,
        idempotency_key: str | None = None,
        **options: Any,
    ) -> AsyncResult:
        """Queue with Celery options (countdown, eta, argsrepr, ...) and optionally another lane."""
        args, kwargs = tuple(args), kwargs or {}
        self.check_arguments(args, kwargs)
        self.check_delay(options)
        if idempotency_key is not None:
            options["headers"] = {**options.get("headers", {}), "idempotency_key": idempotency_key}
        if lane is not None:
            options["queue"] = qualified_queue(check_lane(lane), self.app.settings.queue_namespace)
        # Given, they are kept: a job with secrets in its arguments may hide them.
        options.setdefault("argsrepr", shown(args))
        options.setdefault("kwargsrepr", shown(kwargs))
        return send(self, args, kwargs, options)

    def check_delay(self, options: dict[str, Any]) -> None:
        """Refuse a countdown or eta further ahead than a worker holds a job (TASK_MAX_ETA).

        RabbitMQ quorum lanes keep a delayed job in the broker, not the worker:
        there any delay is taken.
        """
        if self.app.settings.broker_kind == "amqp" and project.QUEUE_TYPE == "quorum":
            return
        settings = self.app.settings
        countdown = options.get("countdown")
        if isinstance(countdown, int | float):
            ahead: float | None = countdown
        else:
            ahead = seconds_ahead(options.get("eta"), datetime.now(UTC), settings.timezone)
        limit = settings.effective_task_max_eta
        if ahead is not None and ahead > limit:
            raise DelayTooLongError(job=self.name, seconds=ahead, limit=limit)

    @functools.cached_property
    def run_signature(self) -> inspect.Signature:
        """The signature of the job's code, read once: every dispatch checks against it."""
        return inspect.signature(self.run)

    def check_arguments(self, args: tuple[Any, ...] | list[Any], kwargs: dict[str, Any]) -> None:
        """Refuse arguments the job's signature cannot take, before anything is sent."""
        signature = self.run_signature
        try:
            signature.bind(*args, **kwargs)
        except TypeError as exc:
            raise JobArgumentsError(
                job=self.name, reason=str(exc), signature=str(signature)
            ) from None


class IdempotentJob(Job):
    """A job whose idempotency key's work runs once (see idempotency.py).

    A subclass rather than a check in Job: Celery calls a task's `run` directly
    unless the class overrides `__call__`, and most jobs should keep that fast path.
    """

    abstract = True
    idempotent = True

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self.request.called_directly:
            return super().__call__(*args, **kwargs)
        from workergen_runtime.idempotency import run_once

        parent = super()
        return run_once(self, args, kwargs, lambda: parent.__call__(*args, **kwargs))


def _as_function(obj: Callable[..., Any]) -> Callable[..., Any]:
    """A class with `handle` becomes a function that runs a fresh instance's `handle`."""
    if not inspect.isclass(obj):
        return obj
    handle = obj.handle
    cls = obj

    @functools.wraps(handle)
    def run(*args: Any, **kwargs: Any) -> Any:
        return cls().handle(*args, **kwargs)

    params = list(inspect.signature(handle).parameters.values())[1:]
    run.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    run.__name__ = run.__qualname__ = cls.__name__
    run.__module__ = cls.__module__
    run.__doc__ = cls.__doc__
    del run.__wrapped__
    return run


def default_job_name(obj: Callable[..., Any]) -> str:
    """`<package>.jobs.billing.refund` gives the task name `<package>.billing.refund`."""
    module = obj.__module__
    package, _, rest = module.partition(".jobs.")
    if not rest:
        package, _, rest = module.partition(".crons.")
    return f"{package}.{rest}" if rest else f"{module}.{obj.__name__}"


def time_limit_options(soft_time_limit: int | None, time_limit: int | None) -> dict[str, int]:
    """Per-task time limits that override TASK_SOFT_TIME_LIMIT / TASK_TIME_LIMIT, if given."""
    options = {"soft_time_limit": soft_time_limit, "time_limit": time_limit}
    return {key: value for key, value in options.items() if value is not None}


def job(
    obj: Callable[..., Any] | None = None,
    *,
    name: str | None = None,
    queue: str = DEFAULT_LANE,
    retry_for: tuple[type[BaseException], ...] = (),
    max_retries: int | None = None,
    backoff: int | None = None,
    backoff_max: int | None = None,
    jitter: bool = True,
    idempotent: bool = False,
    soft_time_limit: int | None = None,
    time_limit: int | None = None,
    **options: Any,
) -> Any:
    """Register a job: a class with `handle(...)` or a function, on a lane.

    The task name is the wire contract between producer and worker: give it
    explicitly (`name="billing.send_invoice"`) or it is derived from the module.
    Only `retry_for` errors are retried.
    """

    def register(target: Callable[..., Any]) -> Job:
        fun = _as_function(target)
        task_options: dict[str, Any] = {
            **retry_policy(
                retry_for,
                max_retries=max_retries,
                backoff=backoff,
                backoff_max=backoff_max,
                jitter=jitter,
                settings=app.settings,
            ),
            **options,
        }
        task_options.update(time_limit_options(soft_time_limit, time_limit))
        return app.task(
            fun,
            name=name or default_job_name(fun),
            base=IdempotentJob if idempotent else Job,
            lane=check_lane(queue),
            **task_options,
        )

    return register(obj) if obj is not None else register
