"""DJANGO_SCHEDULER = "database": django-celery-beat's DatabaseScheduler under the leader lock.

Its entries are the PeriodicTask rows (edited in the admin) and the project's
@cron_task crons, which it writes there at start; only the leader sends them.
"""

from __future__ import annotations

from collections.abc import Container, Iterator
from datetime import datetime, timedelta
from typing import Any

from django_celery_beat.models import PeriodicTask
from django_celery_beat.schedulers import DatabaseScheduler

from workergen_runtime.scheduling.scheduler import Leadership


class LeaderDatabaseScheduler(Leadership, DatabaseScheduler):
    """django-celery-beat's DatabaseScheduler, sending only while it holds the leader lock."""


def database_entries(crons: Container[str], now: datetime) -> Iterator[str]:
    """One line per PeriodicTask row that is not one of the project's crons, by name.

    The crons are written to the table when the scheduler starts, and listed by
    `schedule list` from the code; these are the entries made in the admin.
    """
    from workergen_runtime.celery_app import app

    for entry in PeriodicTask.objects.order_by("name"):
        if entry.name in crons:
            continue
        task: Any = app.tasks.get(entry.task)
        lane = entry.queue or getattr(task, "lane", None) or "?"
        yield (
            f"{entry.name}  task={entry.task}  lane={lane}  schedule={entry.scheduler}  "
            f"next={_next_due(entry, now)}  (database)"
        )


def _next_due(entry: PeriodicTask, now: datetime) -> str:
    if not entry.enabled:
        return "disabled"
    if entry.one_off and entry.total_run_count:
        return "done (one-off)"
    remaining = entry.schedule.remaining_estimate(entry.last_run_at or now)
    return (now + max(remaining, timedelta(0))).isoformat(timespec="seconds")
