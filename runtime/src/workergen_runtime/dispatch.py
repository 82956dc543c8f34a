"""Putting messages on the broker: broker_guard turns transport errors into one error."""

from __future__ import annotations

import socket
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlsplit

from kombu.exceptions import OperationalError

from workergen_runtime import project
from workergen_runtime.errors import QueueUnavailableError
from workergen_runtime.settings import Settings, get_settings, mask_password

BROKER_ERRORS: tuple[type[BaseException], ...] = (OperationalError, ConnectionError, socket.error)


def result_backend_errors() -> tuple[type[BaseException], ...]:
    """redis-py's connection errors, if redis is loaded: nothing else can raise them.

    Not imported for the check: a worker or producer on RabbitMQ without a Redis
    result backend never loads redis.
    """
    loaded = sys.modules.get("redis.exceptions")
    return (loaded.ConnectionError, loaded.TimeoutError) if loaded else ()


@contextmanager
def broker_guard(settings: Settings | None = None) -> Iterator[None]:
    """Raise QueueUnavailableError, with what to do, when the broker cannot take a message.

    The message names the broker of `settings` (a job's app passes its own),
    else of the process's settings. With a result backend, Celery subscribes to
    the job's result before it publishes; a backend that cannot be reached is
    reported the same way.
    """
    try:
        yield
    except BROKER_ERRORS as exc:
        current = settings or get_settings()
        backend = current.effective_result_backend
        # Older kombu wraps the result backend's connection error as a broker error.
        where = urlsplit(backend) if backend else None
        if where and where.port and f"{where.hostname}:{where.port}" in str(exc):
            raise backend_unavailable(backend, exc) from exc
        broker = current.safe_broker_url
        raise QueueUnavailableError(broker=broker, reason=str(exc) or type(exc).__name__) from exc
    except (RuntimeError, *result_backend_errors()) as exc:
        backend = (settings or get_settings()).effective_result_backend
        # Celery's result consumer gives up reconnecting with a RuntimeError.
        cause = exc.__cause__ if isinstance(exc, RuntimeError) else exc
        if backend is None or not isinstance(cause, result_backend_errors()):
            raise
        raise backend_unavailable(backend, cause) from exc


def backend_unavailable(backend: str, cause: BaseException) -> QueueUnavailableError:
    """The error for a result backend that cannot be reached, its password masked."""
    return QueueUnavailableError(
        broker=mask_password(backend),
        reason=str(cause) or type(cause).__name__,
        service="result backend",
        setting="RESULT_BACKEND_URL",
    )


def send(task: Any, args: tuple[Any, ...], kwargs: dict[str, Any], options: dict[str, Any]) -> Any:
    """Put `task`'s message on the broker, through broker_guard; returns its AsyncResult.

    In a Django project, inside `transaction.atomic()` it is sent once the
    transaction commits, and never if it rolls back (workergen_runtime.django.transactions).
    """
    if project.FRAMEWORK == "django":
        from celery.utils import uuid

        from workergen_runtime.django.transactions import sent_on_commit

        # The id is known before the message is sent: the result names it either way.
        options = {**options, "task_id": options.get("task_id") or uuid()}
        if sent_on_commit(lambda: publish(task, args, kwargs, options)):
            return task.AsyncResult(options["task_id"])
    return publish(task, args, kwargs, options)


def publish(
    task: Any, args: tuple[Any, ...], kwargs: dict[str, Any], options: dict[str, Any]
) -> Any:
    """Send `task`'s message now; a broker that cannot be reached is a QueueUnavailableError."""
    with broker_guard(task.app.settings):
        return task.apply_async(args=args, kwargs=kwargs, **options)
