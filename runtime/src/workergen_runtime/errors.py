"""The project's error tree: every expected failure is a ProjectError."""

from __future__ import annotations


class ProjectError(Exception):
    """Root of the errors the CLI shows as a message, without a traceback."""


class ConfigurationError(ProjectError):
    """The settings cannot work together; the message says which to change."""


class QueueUnavailableError(ProjectError):
    """The broker (or the result backend a dispatch subscribes to) could not take the message."""

    def __init__(
        self, *, broker: str, reason: str, service: str = "broker", setting: str = "BROKER_URL"
    ) -> None:
        self.broker = broker
        self.reason = reason
        super().__init__(
            f"The {service} at {broker} is unavailable ({reason}). The job was NOT queued. "
            f"Check that the {service} is running and that {setting} points at it, "
            "then dispatch again."
        )


class UnknownLaneError(ProjectError):
    """A job or command named a lane the project does not have."""

    def __init__(self, *, lane: str, lanes: tuple[str, ...]) -> None:
        super().__init__(
            f"Unknown lane {lane!r}. The project's lanes are: {', '.join(lanes)}. "
            "Lanes are set by the 'lanes' answer of the template (see .copier-answers.yml)."
        )


class JobImportError(ProjectError):
    """A job or cron module cannot be imported, so no worker or scheduler may start."""

    def __init__(self, *, module: str, error: BaseException) -> None:
        self.module = module
        super().__init__(
            f"Cannot import {module}: {type(error).__name__}: {error}. "
            "Workers and the scheduler start only when every job and cron module imports; "
            f"fix {module} (or remove it) and start again."
        )


class JobArgumentsError(ProjectError):
    """A dispatch gave arguments the job does not accept; nothing was queued."""

    def __init__(self, *, job: str, reason: str, signature: str) -> None:
        super().__init__(
            f"{job} does not accept these arguments ({reason}); it takes {signature}. "
            "The job was NOT queued."
        )


class DelayTooLongError(ProjectError):
    """A dispatch asked for a countdown or eta further ahead than a worker holds a job."""

    def __init__(self, *, job: str, seconds: float, limit: int) -> None:
        super().__init__(
            f"{job} was asked to run in {seconds:.0f} s, beyond TASK_MAX_ETA ({limit} s): a "
            "worker would hold it unacknowledged that long. Use a shorter countdown, or raise "
            "TASK_MAX_ETA (below VISIBILITY_TIMEOUT on Redis and SQS). The job was NOT queued."
        )
