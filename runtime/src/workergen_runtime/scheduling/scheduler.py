"""The scheduler: Celery beat over the discovered crons, run by one elected leader at a time.

Every `schedule work` process competes for a lock in Redis at LOCK_URL. The holder (leader)
renews it on every tick and sends the due crons; the others stand by and retry. If the leader
dies its lock expires after SCHEDULER_LEADER_TTL seconds (a setting) and a standby takes
over. A new leader counts from the moment it took over, so it never fires again a tick the
old leader already fired.
"""

from __future__ import annotations

import contextlib
import copy
import logging
from datetime import datetime, timedelta
from typing import Any

from celery.beat import Scheduler
from redis.exceptions import LockError

from workergen_runtime.queues import qualified_queue

log = logging.getLogger(__name__)

TICK_INTERVAL = 2


def leader_lock_key(namespace: str) -> str:
    """`scheduler-leader:<namespace>.scheduler`: one leader per namespace and broker."""
    return f"scheduler-leader:{qualified_queue('scheduler', namespace)}"


def beat_schedule(celery_app: Any) -> dict[str, dict[str, Any]]:
    """Celery's beat_schedule, built from every discovered cron of an app."""
    from workergen_runtime.scheduling.crons import registered_crons

    return {
        name: {"task": name, "schedule": task.schedule}
        for name, task in registered_crons(celery_app).items()
    }


class Leadership:
    """What makes a beat scheduler class send nothing unless it holds the leader lock.

    Mixed in before Celery's Scheduler (LeaderScheduler) or a subclass of it, such as
    django-celery-beat's DatabaseScheduler (workergen_runtime.django.scheduler).
    """

    app: Any
    schedule: Any
    leading = False

    def setup_schedule(self) -> None:
        from workergen_runtime.locks import expiring_lock

        settings = self.app.settings
        self.leader = expiring_lock(
            settings, leader_lock_key(settings.queue_namespace), ttl=settings.scheduler_leader_ttl
        )
        self.app.conf.beat_schedule = beat_schedule(self.app)
        super().setup_schedule()  # type: ignore[misc]
        log.info("scheduler: %d cron(s): %s", len(self.schedule), ", ".join(self.schedule))

    def tick(self, *args: Any, **kwargs: Any) -> float:
        if self.leading:
            try:
                self.leader.reacquire()  # back to a full SCHEDULER_LEADER_TTL, if still ours
            except LockError:
                self.leading = False
                log.warning("scheduler: lost the leader lock; standing by")
                return TICK_INTERVAL
        elif self.leader.acquire():
            self.leading = True
            log.info("scheduler: elected leader (%s)", self.leader.name)
            now = self.app.now()
            for entry in self.schedule.values():
                entry.last_run_at = now
        else:
            if not getattr(self, "_said_standby", False):
                log.info("scheduler: standing by; another scheduler leads (%s)", self.leader.name)
                self._said_standby = True
            return TICK_INTERVAL
        self._said_standby = False
        return min(super().tick(*args, **kwargs), TICK_INTERVAL)  # type: ignore[misc]

    def close(self) -> None:
        if self.leading:
            self.leading = False
            with contextlib.suppress(LockError):  # expired already: nothing to give back
                self.leader.release()
        super().close()  # type: ignore[misc]


class LeaderScheduler(Leadership, Scheduler):
    """Celery's beat scheduler over the discovered crons, under the leader lock."""


def uses_database_scheduler() -> bool:
    """Whether the project is a Django project whose schedules are django-celery-beat's."""
    from workergen_runtime import project

    return project.FRAMEWORK == "django" and project.DJANGO_SCHEDULER == "database"


def scheduler_class() -> type[Scheduler]:
    """The scheduler `schedule work` runs: in a Django project with DJANGO_SCHEDULER =
    "database", django-celery-beat's DatabaseScheduler under the same leader lock."""
    if uses_database_scheduler():
        from workergen_runtime.django.scheduler import LeaderDatabaseScheduler

        return LeaderDatabaseScheduler
    return LeaderScheduler


def is_due_now(schedule: Any, now: datetime) -> bool:
    """Whether a schedule fires in the minute `now` falls in (intervals are always due)."""
    from celery.schedules import crontab

    if not isinstance(schedule, crontab):
        return True
    weekday = now.isoweekday() % 7
    return (
        now.minute in schedule.minute
        and now.hour in schedule.hour
        and now.day in schedule.day_of_month
        and now.month in schedule.month_of_year
        and weekday in schedule.day_of_week
    )


def next_run(schedule: Any, now: datetime) -> datetime:
    """When a schedule fires next after `now`, to the second."""
    from celery.schedules import crontab

    if isinstance(schedule, crontab):
        # Celery before 5.7 compares with its own clock inside remaining_delta:
        # a copy whose clock is `now` answers for `now` on every release.
        schedule = copy.copy(schedule)
        schedule.nowfun = lambda: now
        start, delta, _ = schedule.remaining_delta(now)
        exact = start + delta
    else:
        exact = now + schedule.run_every
    return (exact + timedelta(microseconds=500_000)).replace(microsecond=0)
