"""Retries: only for transient errors, with exponential backoff, jitter and a cap."""

from __future__ import annotations

from typing import Any

from workergen_runtime.settings import Settings, get_settings


def retry_policy(
    retry_for: tuple[type[BaseException], ...] = (),
    *,
    max_retries: int | None = None,
    backoff: int | None = None,
    backoff_max: int | None = None,
    jitter: bool = True,
    settings: Settings | None = None,
) -> dict[str, Any]:
    """Celery task options that retry `retry_for` errors.

    Retry N waits about backoff * 2**(N-1) seconds, never more than backoff_max;
    with jitter the wait is drawn at random below that, so retries of many tasks
    do not hit a recovering service at once. Errors not listed fail at once.
    Unset values come from `settings` (a job's app passes its own), else from
    the process's settings.
    """
    settings = settings or get_settings()
    backoff = settings.task_retry_backoff if backoff is None else backoff
    return {
        "autoretry_for": tuple(retry_for),
        "max_retries": settings.task_max_retries if max_retries is None else max_retries,
        "retry_backoff": backoff,
        # Celery waits default_retry_delay when backoff is 0; keep that wait the same.
        "default_retry_delay": backoff,
        "retry_backoff_max": (
            settings.task_retry_backoff_max if backoff_max is None else backoff_max
        ),
        "retry_jitter": jitter,
    }
