"""The Celery application (not named celery.py, so it never shadows the library)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from functools import cached_property
from typing import Any

from celery import Celery, signals

from . import project
from .config import build_config
from .discovery import job_modules
from .log import configure_logging
from .queues import qualified_queue
from .settings import Settings, get_settings


def route_by_lane(
    name: str, args: Any, kwargs: Any, options: dict[str, Any], task: Any = None, **_: Any
) -> dict[str, str] | None:
    """Send a job to the namespaced queue of its lane."""
    lane = getattr(task, "lane", None)
    return {"queue": qualified_queue(lane)} if lane else None


class ConfigFromSettings(Mapping[str, Any]):
    """Celery's configuration, built from the settings when Celery first reads it.

    Importing the app (and every job module) reads no setting, so `--help`
    works with bad settings and a bad one is reported by the command that
    needs it, inside the CLI's error boundary, as a message.
    """

    def __init__(self, settings: Settings | None = None) -> None:
        self._settings = settings

    @cached_property
    def _config(self) -> dict[str, Any]:
        return {
            **build_config(self._settings or get_settings()),
            "task_routes": (route_by_lane,),
            "include": job_modules(),
        }

    def __getitem__(self, key: str) -> Any:
        return self._config[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._config)

    def __len__(self) -> int:
        return len(self._config)


def create_app(settings: Settings | None = None) -> Celery:
    """Build the Celery app from settings; jobs and crons are discovered, not listed.

    Without settings, the process-wide ones are read when the app is first used.
    """
    celery_app = Celery(project.PACKAGE)
    celery_app.config_from_object(ConfigFromSettings(settings))
    return celery_app


@signals.setup_logging.connect
def _setup_logging(loglevel: str | None = None, **_: Any) -> None:
    # Connecting here keeps Celery from reconfiguring logging; we log our own way.
    settings = get_settings()
    configure_logging(
        loglevel or settings.log_level, settings.log_format, every_job=settings.log_every_job
    )


app = create_app()
