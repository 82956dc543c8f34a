"""The @cron_task decorator: scheduled work that never runs twice at once and is never retried."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from celery.schedules import schedule as Schedule

from .celery_app import app
from .jobs import Job, _as_function, default_job_name, time_limit_options
from .queues import DEFAULT_LANE, check_lane, qualified_queue
from .settings import get_settings

log = logging.getLogger(__name__)

# A lock outlives the hard time limit by this much, so it never expires under a live run.
LOCK_MARGIN = 30


def overlap_lock_key(name: str) -> str:
    """`cron-lock:<namespace>.<cron name>`: namespaced like every queue."""
    return f"cron-lock:{qualified_queue(name)}"


class CronTask(Job):
    """A cron: knows its schedule; skips a run while the previous one still holds the lock."""

    abstract = True
    schedule: Schedule | None = None
    without_overlapping: bool = True

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if not self.without_overlapping or self.request.called_directly:
            return super().__call__(*args, **kwargs)
        from .locks import ExpiringLock

        limit = self.time_limit or get_settings().task_time_limit
        lock = ExpiringLock(overlap_lock_key(self.name), ttl=limit + LOCK_MARGIN)
        if not lock.acquire():
            log.warning("cron %s skipped: the previous run still holds %s", self.name, lock.key)
            return None
        try:
            return super().__call__(*args, **kwargs)
        finally:
            lock.release()


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


def registered_crons() -> dict[str, CronTask]:
    """Every cron of the project (imports jobs/ and crons/ first), by name."""
    from .discovery import import_jobs

    import_jobs()
    return {
        task_name: task
        for task_name, task in sorted(app.tasks.items())
        if isinstance(task, CronTask)
    }
