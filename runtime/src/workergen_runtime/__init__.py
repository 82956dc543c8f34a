"""workergen's worker runtime: the Celery set-up every generated project runs on.

A project's own code (jobs/, crons/, tests/) imports what it needs from here.
What this module exports is the public API (docs/runtime.md); the rest of the
package is private. Names are imported on first use, so importing the package,
or a module of it such as the scaffolding, loads neither Celery nor the settings.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"
"""The release of the runtime; the package's version is read from here when it is built."""

# Public name -> the module that defines it.
_EXPORTS = {
    "ConfigurationError": "errors",
    "DeadLetter": "deadletter",
    "Job": "jobs",
    "ProjectError": "errors",
    "QueueUnavailableError": "errors",
    "Settings": "settings",
    "broker_guard": "dispatch",
    "cron_task": "scheduling.crons",
    "dead_letter_queue": "queues",
    "get_settings": "settings",
    "job": "jobs",
    "job_dead_lettered": "signals",
    "qualified_queue": "queues",
    "retry_policy": "retry",
    "start_flow": "flows",
}

__all__ = [
    "ConfigurationError",
    "DeadLetter",
    "Job",
    "ProjectError",
    "QueueUnavailableError",
    "Settings",
    "broker_guard",
    "cron_task",
    "dead_letter_queue",
    "get_settings",
    "job",
    "job_dead_lettered",
    "qualified_queue",
    "retry_policy",
    "start_flow",
]

if TYPE_CHECKING:
    from workergen_runtime.deadletter import DeadLetter
    from workergen_runtime.dispatch import broker_guard
    from workergen_runtime.errors import ConfigurationError, ProjectError, QueueUnavailableError
    from workergen_runtime.flows import start_flow
    from workergen_runtime.jobs import Job, job
    from workergen_runtime.queues import dead_letter_queue, qualified_queue
    from workergen_runtime.retry import retry_policy
    from workergen_runtime.scheduling.crons import cron_task
    from workergen_runtime.settings import Settings, get_settings
    from workergen_runtime.signals import job_dead_lettered


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})
