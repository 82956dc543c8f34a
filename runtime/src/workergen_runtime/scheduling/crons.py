"""The @cron_task decorator: scheduled work that never runs twice at once and is never retried."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from celery import Celery
from celery.schedules import schedule as Schedule

from workergen_runtime.celery_app import app
from workergen_runtime.jobs import Job, _as_function, default_job_name, time_limit_options
from workergen_runtime.queues import DEFAULT_LANE, check_lane, qualified_queue

log = logging.getLogger(__name__)

# A lock outlives the hard time limit by this much, so it never expires under a live run.
LOCK_MARGIN = 30


def overlap_lock_key(name: str, namespace: str) -> str:
    """`cron-lock:<namespace>.<cron name>`: namespaced like every queue."""
    return f"cron-lock:{qualified_queue(name, namespace)}"


class CronTask(Job):
    """A cron: knows its schedule; skips a run while the previous one still holds the lock."""

    abstract = True
    schedule: Schedule | None = None
    without_overlapping: bool = True

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if not self.without_overlapping or self.request.called_directly:
            return super().__call__(*args, **kwargs)
        from redis.exceptions import LockNotOwnedError

        from workergen_runtime.locks import expiring_lock

        settings = self.app.settings
        limit = self.time_limit or settings.task_time_limit
        key = overlap_lock_key(self.name, settings.queue_namespace)
        lock = expiring_lock(settings, key, ttl=limit + LOCK_MARGIN)
        if not lock.acquire():
            log.warning("cron %s skipped: the previous run still holds %s", self.name, key)
            return None
        try:
            return super().__call__(*args, **kwargs)
        finally:
            try:
                lock.release()
            except LockNotOwnedError:  # it expired, and maybe a later run holds it now
                log.warning("cron %s outlived its lock %s", self.name, key)


def cron_task(
    name: str | None = None,
    *,
    schedule: Schedule,
    queue: str = DEFAULT_LANE,
    without_overlapping: bool = True,
    soft_time_limit: int | None = None,
    time_limit: int | None = None,
) -> Callable[[Callable[..., Any]], CronTask]:
    """Register a cron (a class with `handle()` or a function) on a schedule and a lane."""

    def register(target: Callable[..., Any]) -> CronTask:
        fun = _as_function(target)
        return app.task(
            fun,
            name=name or default_job_name(fun),
            base=CronTask,
            lane=check_lane(queue),
            schedule=schedule,
            without_overlapping=without_overlapping,
            # Crons are never retried: the next tick is the retry.
            autoretry_for=(),
            max_retries=0,
            **time_limit_options(soft_time_limit, time_limit),
        )

    return register


def registered_crons(celery_app: Celery = app) -> dict[str, CronTask]:
    """Every cron of an app (imports jobs/ and crons/ first), by name."""
    from workergen_runtime.discovery import import_jobs

    import_jobs()
    return {
        task_name: task
        for task_name, task in sorted(celery_app.tasks.items())
        if isinstance(task, CronTask)
    }
