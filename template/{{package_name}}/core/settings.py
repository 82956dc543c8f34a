"""Settings from the environment and `.env`; effective values are properties."""

from __future__ import annotations

from functools import lru_cache
from typing import Annotated, Literal
from urllib.parse import urlsplit, urlunsplit

from pydantic import Field, ValidationError, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from . import project
from .errors import ConfigurationError

LOCAL_REDIS = "redis://localhost:6379/0"
DEFAULT_BROKER_URLS = {
    "redis": LOCAL_REDIS,
    "rabbitmq": "amqp://guest:guest@localhost:5672//",
    "sqs": "sqs://",
}

LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")

BrokerKind = Literal["redis", "amqp", "sqs", "filesystem", "memory"]


class Settings(BaseSettings):
    """Every knob of the project, read from the environment or `.env`."""

    model_config = SettingsConfigDict(env_file=".env", env_file_encoding="utf-8", extra="ignore")

    broker_url: str = ""
    result_backend_url: str = ""
    lock_url: str = ""
    queue_namespace: str = project.DEFAULT_NAMESPACE
    visibility_timeout: int = Field(default=3600, gt=0)
    task_soft_time_limit: int = Field(default=300, gt=0)
    task_time_limit: int = Field(default=330, gt=0)
    task_max_retries: int = Field(default=3, ge=0)
    task_retry_backoff: int = Field(default=2, ge=0)
    task_retry_backoff_max: int = Field(default=600, ge=0)
    idempotency_retention: int = Field(default=86_400, ge=1)
    task_max_deliveries: int = Field(default=5, ge=1)
    # Seconds a job no worker knows is sent back to its lane (a worker that has
    # it may be deploying) before it is dead-lettered as unknown-task.
    unknown_task_grace: int = Field(default=300, ge=0)
    # Redis: a worker whose heartbeat is this many seconds old is dead, and its
    # unacknowledged jobs go back on their lanes.
    worker_heartbeat_ttl: int = Field(default=15, ge=3)
    # Messages reserved per worker process: one on lanes of long jobs, more on a
    # lane of short jobs so its worker never waits on the broker between jobs.
    # Late acknowledgement still gives every reserved message back on a crash.
    worker_prefetch_multiplier: int = Field(default=1, ge=1)
    # Lanes of short jobs and the messages each worker process reserves on them.
    lane_prefetch: dict[str, Annotated[int, Field(ge=1)]] = Field(
        default_factory=lambda: {"default": 4}
    )
    worker_max_tasks_per_child: int = Field(default=10_000, ge=1)
    worker_max_memory_per_child: int = Field(default=512_000, ge=1)
    log_level: str = "INFO"
    log_format: Literal["json", "text"] = "json"
    # Celery's "received" and "succeeded" lines for every job (always at DEBUG).
    log_every_job: bool = False
    timezone: str = "UTC"
    sqs_region: str = project.SQS_REGION
    # None: plain HTTP only for a local endpoint (127.0.0.1 or localhost in BROKER_URL).
    sqs_is_secure: bool | None = None
    # RabbitMQ: where `queue provision` and workers set the lanes' dead-letter
    # policies (e.g. http://user:password@rabbit:15672); empty = rabbitmqctl on this machine.
    rabbitmq_management_url: str = ""
    # Only the highest-priority policy matching a queue applies to it.
    rabbitmq_policy_priority: int = Field(default=10, ge=0)
    # Prometheus metrics of `queue work` / `schedule work` on this port; 0 = off.
    metrics_port: int = Field(default=0, ge=0, le=65535)
    # `monitor` (Flower): user:password, several separated by commas; empty = loopback only.
    monitor_basic_auth: str = ""

    @property
    def effective_broker_url(self) -> str:
        """BROKER_URL, or the local development broker for this project's broker."""
        return self.broker_url or DEFAULT_BROKER_URLS[project.BROKER]

    @property
    def effective_result_backend(self) -> str | None:
        """RESULT_BACKEND_URL, or None: no result backend (fire-and-forget)."""
        return self.result_backend_url or None

    @property
    def effective_lock_url(self) -> str:
        """LOCK_URL, else the broker when it is Redis, else local Redis."""
        if self.lock_url:
            return self.lock_url
        if self.broker_kind == "redis":
            return self.effective_broker_url
        return LOCAL_REDIS

    @property
    def broker_kind(self) -> BrokerKind:
        """The transport family of the effective broker URL."""
        scheme = urlsplit(self.effective_broker_url).scheme.split("+")[0]
        if scheme in ("redis", "rediss", "sentinel"):
            return "redis"
        if scheme in ("amqp", "amqps", "pyamqp"):
            return "amqp"
        if scheme == "sqs":
            return "sqs"
        if scheme == "filesystem":
            return "filesystem"
        return "memory"

    @property
    def uses_visibility_timeout(self) -> bool:
        """Redis and SQS redeliver unacknowledged messages after the visibility timeout."""
        return self.broker_kind in ("redis", "sqs")

    @property
    def sqs_endpoint(self) -> str | None:
        """The SQS endpoint named by BROKER_URL's host, or None for AWS's own endpoint."""
        parts = urlsplit(self.effective_broker_url)
        if not parts.hostname:
            return None
        scheme = "https" if self.effective_sqs_is_secure else "http"
        port = f":{parts.port}" if parts.port else ""
        return f"{scheme}://{parts.hostname}{port}"

    @property
    def effective_sqs_is_secure(self) -> bool:
        """SQS_IS_SECURE, else HTTPS unless BROKER_URL points at this machine."""
        if self.sqs_is_secure is not None:
            return self.sqs_is_secure
        return urlsplit(self.effective_broker_url).hostname not in LOOPBACK_HOSTS

    @property
    def safe_broker_url(self) -> str:
        """The broker URL with its password masked, fit for logs and messages."""
        return mask_password(self.effective_broker_url)

    @model_validator(mode="after")
    def _limits_fit_together(self) -> Settings:
        if self.task_soft_time_limit >= self.task_time_limit:
            raise ValueError(
                f"TASK_SOFT_TIME_LIMIT ({self.task_soft_time_limit} s) must be shorter than "
                f"TASK_TIME_LIMIT ({self.task_time_limit} s), so a task can clean up "
                "before it is killed."
            )
        if self.uses_visibility_timeout:
            for name, value in (
                ("TASK_TIME_LIMIT", self.task_time_limit),
                ("TASK_RETRY_BACKOFF_MAX", self.task_retry_backoff_max),
            ):
                if self.visibility_timeout <= value:
                    raise ValueError(
                        f"VISIBILITY_TIMEOUT ({self.visibility_timeout} s) must be longer than "
                        f"{name} ({value} s): the broker would hand a task that is still "
                        "running or waiting to retry to a second worker. Raise VISIBILITY_TIMEOUT "
                        f"or lower {name}."
                    )
        for lane, prefetch in self.lane_prefetch.items():
            if lane not in project.LANES:
                raise ValueError(
                    f"LANE_PREFETCH names the lane {lane!r}, which this project does not have "
                    f"(lanes: {', '.join(project.LANES)})."
                )
            self.check_prefetch(prefetch, f"LANE_PREFETCH for {lane!r}")
        self.check_prefetch(self.worker_prefetch_multiplier, "WORKER_PREFETCH_MULTIPLIER")
        return self

    def prefetch_for(self, lanes: list[str] | tuple[str, ...]) -> int:
        """Messages reserved per process by a worker on these lanes.

        A worker reserves one number for all its lanes, so a lane of long jobs
        among them (one not in LANE_PREFETCH) keeps it at WORKER_PREFETCH_MULTIPLIER.
        """
        return min(self.lane_prefetch.get(lane, self.worker_prefetch_multiplier) for lane in lanes)

    def check_prefetch(self, prefetch: int, name: str) -> None:
        """Refuse a prefetch whose last reserved message could outwait the visibility timeout.

        That message waits for up to `prefetch` jobs per process ahead of it, each
        up to TASK_TIME_LIMIT; past VISIBILITY_TIMEOUT the broker would hand it to
        a second worker while the first still holds it.
        """
        if not self.uses_visibility_timeout or prefetch <= 1:
            return
        longest_wait = prefetch * self.task_time_limit
        if self.visibility_timeout <= longest_wait:
            raise ValueError(
                f"VISIBILITY_TIMEOUT ({self.visibility_timeout} s) must be longer than "
                f"{name} ({prefetch}) x TASK_TIME_LIMIT ({self.task_time_limit} s) = "
                f"{longest_wait} s: a reserved job could wait that long and run twice. "
                f"Raise VISIBILITY_TIMEOUT or lower {name}."
            )


def mask_password(url: str) -> str:
    """Hide the password (or SQS secret) of a URL."""
    parts = urlsplit(url)
    if not parts.password:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return urlunsplit(parts._replace(netloc=netloc))


def describe_validation_error(error: ValidationError) -> str:
    """One line per wrong setting, named as in the environment."""
    lines = []
    for item in error.errors():
        where = "_".join(str(part) for part in item["loc"]).upper()
        message = item["msg"].removeprefix("Value error, ")
        lines.append(f"{where}: {message}" if where else message)
    return "Invalid settings:\n  " + "\n  ".join(lines)


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process-wide settings, read once; bad settings raise ConfigurationError."""
    try:
        return Settings()
    except ValidationError as exc:
        raise ConfigurationError(describe_validation_error(exc)) from None
