"""The Celery application (not named celery.py, so it never shadows the library)."""

from __future__ import annotations

import functools
import gc
from collections.abc import Iterator, Mapping
from typing import Any

from celery import Celery, signals

from workergen_runtime import project
from workergen_runtime.config import build_config
from workergen_runtime.discovery import job_modules
from workergen_runtime.log import configure_logging
from workergen_runtime.ops.metrics import stamp_sent_at
from workergen_runtime.queues import qualified_queue
from workergen_runtime.settings import Settings, get_settings


class ProjectApp(Celery):
    """A Celery app that keeps the Settings it was built from.

    Everything the runtime names or decides for a job (its queue, dead-letter queue,
    locks, idempotency keys, delivery counters) reads them here, from the job's
    own app, so two apps in one process never mix their namespaces.
    """

    def __init__(self, *args: Any, settings: Settings | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._settings = settings

    @property
    def settings(self) -> Settings:
        """The app's settings; the process-wide ones, read on first use, when none were given.

        Reading them late keeps importing the project (and every job module) free
        of settings: `--help` works with bad ones, and the command that needs them
        reports a bad one inside the CLI's error boundary, as a message.
        """
        if self._settings is None:
            self._settings = get_settings()
        return self._settings

    def prepare_config(self, c: Any) -> Any:
        """Celery's hook for the configuration it loads: a plain dict of it.

        Celery looks its settings up in a chain of mappings, a dozen of them on
        every dispatch; a dict answers a key it lacks without running any Python.
        Still read when Celery first needs its configuration, never earlier.
        """
        return super().prepare_config(dict(c))

    def __reduce_keys__(self) -> dict[str, Any]:
        return {**super().__reduce_keys__(), "settings": self._settings}


class ConfigFromSettings(Mapping[str, Any]):
    """Celery's configuration from the app's settings, built when Celery first reads it."""

    def __init__(self, app: ProjectApp) -> None:
        self._app = app

    @functools.cached_property
    def _config(self) -> dict[str, Any]:
        settings = self._app.settings
        return {
            **build_config(settings),
            "task_routes": (functools.partial(route_by_lane, namespace=settings.queue_namespace),),
            "include": job_modules(),
        }

    def __getitem__(self, key: str) -> Any:
        return self._config[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._config)

    def __len__(self) -> int:
        return len(self._config)


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
    """Build the Celery app from settings; jobs and crons are discovered, not listed.

    Without settings, the process-wide ones are read when the app is first used.
    """
    celery_app = ProjectApp(project.PACKAGE, settings=settings)
    celery_app.config_from_object(ConfigFromSettings(celery_app))
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


@signals.celeryd_after_setup.connect
def _freeze_before_fork(**_: Any) -> None:
    # Sent just before the pool starts its processes. Frozen, what the worker has loaded is
    # never scanned by the cycle collector again: not before each fork (Celery collects
    # there), not in the pool processes, whose collections would otherwise write to every
    # inherited object and so copy the pages they share with the main process.
    gc.collect()
    gc.freeze()


app = create_app()
