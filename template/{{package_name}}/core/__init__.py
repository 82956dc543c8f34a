"""The project's core, owned by the template: `copier update` keeps it current.

Your code lives in `jobs/`, `crons/` and `tests/`; import what you need from here.
What this module exports is the public API (docs/runtime.md); the rest of core/ is private.
"""

from .crons import cron_task
from .deadletter import DeadLetter
from .dispatch import broker_guard
from .errors import ConfigurationError, ProjectError, QueueUnavailableError
from .flows import start_flow
from .jobs import Job, job
from .queues import dead_letter_queue, qualified_queue
from .retry import retry_policy
from .settings import Settings, get_settings
from .signals import job_dead_lettered

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
