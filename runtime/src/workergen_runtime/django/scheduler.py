"""DJANGO_SCHEDULER = "database": django-celery-beat's DatabaseScheduler under the leader lock.

Its entries are the PeriodicTask rows (edited in the admin) and the project's
@cron_task crons, which it writes there at start; only the leader sends them.
"""

from __future__ import annotations

from django_celery_beat.schedulers import DatabaseScheduler

from workergen_runtime.scheduling.scheduler import Leadership


class LeaderDatabaseScheduler(Leadership, DatabaseScheduler):
    """django-celery-beat's DatabaseScheduler, sending only while it holds the leader lock."""
