"""The project's core, owned by the template: `copier update` keeps it current.

Your code lives in `jobs/`, `crons/` and `tests/`; import what you need from here.
"""

from .crons import cron_task
from .dispatch import broker_guard
from .errors import ConfigurationError, ProjectError, QueueUnavailableError
from .flows import start_flow
from .jobs import Job, job
from .queues import dead_letter_queue, qualified_queue
from .retry import retry_policy
from .settings import Settings, get_settings

__all__ = [
    "ConfigurationError",
    "Job",
    "ProjectError",
    "QueueUnavailableError",
    "Settings",
    "broker_guard",
    "cron_task",
    "dead_letter_queue",
    "get_settings",
    "job",
    "qualified_queue",
    "retry_policy",
    "start_flow",
]
