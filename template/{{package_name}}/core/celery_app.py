"""The Celery application (not named celery.py, so it never shadows the library)."""

from __future__ import annotations

import functools
from typing import Any

from celery import Celery, signals

from . import project
from .config import build_config
from .discovery import job_modules
from .log import configure_logging
from .metrics import stamp_sent_at
from .queues import qualified_queue
from .settings import Settings, get_settings


class ProjectApp(Celery):
    """A Celery app that keeps the Settings it was built from.

    Everything the core names or decides for a job (its queue, dead-letter queue,
    locks, idempotency keys, delivery counters) reads them here, from the job's
    own app, so two apps in one process never mix their namespaces.
    """

    def __init__(self, *args: Any, settings: Settings, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.settings = settings

    def __reduce_keys__(self) -> dict[str, Any]:
        return {**super().__reduce_keys__(), "settings": self.settings}


def route_by_lane(
    name: str,
    args: Any,
    kwargs: Any,
    options: dict[str, Any],
    task: Any = None,
    *,
    namespace: str,
    **_: Any,
) -> dict[str, str] | None:
    """Send a job to its lane's queue under `namespace`."""
    lane = getattr(task, "lane", None)
    return {"queue": qualified_queue(lane, namespace)} if lane else None


def create_app(settings: Settings | None = None) -> ProjectApp:
    """Build the Celery app from settings; jobs and crons are discovered, not listed."""
    settings = settings or get_settings()
    celery_app = ProjectApp(project.PACKAGE, settings=settings)
    celery_app.config_from_object(build_config(settings))
    celery_app.conf.task_routes = (
        functools.partial(route_by_lane, namespace=settings.queue_namespace),
    )
    celery_app.conf.include = job_modules()
    return celery_app


# Every producer stamps the publish time: the worker's queue wait metric reads it.
signals.before_task_publish.connect(stamp_sent_at)


@signals.setup_logging.connect
def _setup_logging(loglevel: str | None = None, **_: Any) -> None:
    # Connecting here keeps Celery from reconfiguring logging; we log our own way.
    settings = get_settings()
    configure_logging(
        loglevel or settings.log_level, settings.log_format, every_job=settings.log_every_job
    )


app = create_app()
