"""Settings from the environment and `.env`; effective values are properties."""

from __future__ import annotations

import os
import re
from functools import lru_cache
from typing import Annotated, Any, ClassVar, Literal
from urllib.parse import urlsplit
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import Field, ValidationError, ValidationInfo, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict
from pydantic_settings.exceptions import SettingsError

from workergen_runtime import naming, project
from workergen_runtime.errors import ConfigurationError

LOCAL_REDIS = "redis://localhost:6379/0"
# Where a Django project that answered DJANGO_RESULTS keeps results: django-celery-results.
DJANGO_RESULT_BACKEND = "django-db"
DEFAULT_BROKER_URLS = {
    "redis": LOCAL_REDIS,
    "rabbitmq": "amqp://guest:guest@localhost:5672//",
    "sqs": "sqs://",
}

# The URL schemes of each broker's transport; memory:// and filesystem:// are
# kombu's in-process transports, for tests and local runs on any broker.
BROKER_SCHEMES = {
    "redis": ("redis", "rediss", "redis+socket", "sentinel"),
    "rabbitmq": ("amqp", "amqps", "pyamqp"),
    "sqs": ("sqs",),
}
LOCAL_SCHEMES = ("memory", "filesystem")
# The Redis URLs that may be empty: their schemes, and what an empty one means.
OPTIONAL_REDIS_URLS = {
    "result_backend_url": (
        ("redis", "rediss", "redis+socket", "sentinel"),
        "a Redis URL, or empty for no result backend",
    ),
    "lock_url": (("redis", "rediss", "unix"), "a Redis URL, or empty for the default"),
}
# The settings that carry an answer of the template, checked by the answer's rule.
ANSWER_RULES = {
    "queue_namespace": naming.NAMESPACE_RULE,
    "sqs_region": naming.SQS_REGION_RULE,
}
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
# Settings that hold a URL: their values are shown with the password masked.
URL_SETTINGS = ("broker_url", "result_backend_url", "lock_url")

LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")

# Seconds ahead a job's eta may be when TASK_MAX_ETA is unset: SQS's longest
# message delay, and half RabbitMQ's default consumer timeout (30 min), past
# which the broker closes the channel of a worker holding a message unacknowledged.
DEFAULT_MAX_ETA = 900

BrokerKind = Literal["redis", "amqp", "sqs", "filesystem", "memory"]


class Settings(BaseSettings):
    """Every knob of the project, read from the environment or `.env`.

    A setting is a field named after its variable (BROKER_URL -> broker_url),
    with its default and its bounds (`Field(gt=0)`, a Literal of choices); a
    rule on one value is a field validator raising ValueError, a rule between
    values goes in `_limits_fit_together`. Whatever they raise is shown as
    `NAME='value': reason`, never as a traceback (see `get_settings`).
    """

    model_config = SettingsConfigDict(env_file=".env", env_file_encoding="utf-8", extra="ignore")
    # The broker this project was generated for: BROKER_URL must use one of its schemes.
    broker: ClassVar[str] = project.BROKER

    # None (unset): the local development broker. Set, it must be a URL.
    broker_url: str | None = None
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
    # Seconds ahead a job's eta (countdown) may be when it reaches a worker, which
    # holds it unacknowledged until then; further ahead it is dead-lettered as
    # malformed. Unset: see `effective_task_max_eta`.
    task_max_eta: int | None = Field(default=None, gt=0)
    # Redis: the unacknowledged jobs of a worker that stopped sending heartbeats go back
    # on their lanes within this many seconds (at once when a worker of the same host
    # can tell that its process is gone, e.g. the worker restarted after a crash).
    worker_heartbeat_ttl: int = Field(default=15, ge=3)
    # The scheduler's leader lock outlives a leader that died (killed, its machine lost)
    # by this many seconds: a standby `schedule work` leads after that. The leader
    # renews it on every tick (2 s at most apart), so it must span a few ticks.
    scheduler_leader_ttl: int = Field(default=20, ge=6)
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
    # SQS long polling: seconds one receive request waits for a message (SQS allows 20).
    sqs_wait_time_seconds: int = Field(default=10, ge=0, le=20)
    # SQS: seconds the worker waits before it asks again, after an empty receive or
    # while every message it may reserve is taken (kombu's 1 s caps a busy lane).
    # Not 0: kombu would then wait for whatever next wakes the worker up.
    sqs_polling_interval: float = Field(default=0.02, gt=0, le=60)
    # RabbitMQ: where `queue provision` and workers set the lanes' dead-letter
    # policies (e.g. http://user:password@rabbit:15672); empty = rabbitmqctl on this machine.
    rabbitmq_management_url: str = ""
    # Only the highest-priority policy matching a queue applies to it.
    rabbitmq_policy_priority: int = Field(default=10, ge=0)
    # Prometheus metrics of `queue work` / `schedule work` on this port; 0 = off.
    metrics_port: int = Field(default=0, ge=0, le=65535)
    # `monitor` (Flower): user:password, several separated by commas; empty = loopback only.
    monitor_basic_auth: str = ""

    @classmethod
    def for_broker(cls, broker: str) -> type[Settings]:
        """The settings of a project generated for `broker` (tests of the runtime)."""
        if broker == cls.broker:
            return cls
        if broker not in _SETTINGS_FOR_BROKER:
            name = f"{broker.title()}Settings"
            _SETTINGS_FOR_BROKER[broker] = type(name, (cls,), {"broker": broker})
        return _SETTINGS_FOR_BROKER[broker]

    @field_validator("broker_url")
    @classmethod
    def _broker_url_fits_the_broker(cls, value: str | None) -> str | None:
        if value is not None:
            check_url(value, (*BROKER_SCHEMES[cls.broker], *LOCAL_SCHEMES), f"a {cls.broker} URL")
        return value

    @field_validator("result_backend_url", "lock_url")
    @classmethod
    def _redis_url_or_empty(cls, value: str, info: ValidationInfo) -> str:
        if value:
            check_url(value, *OPTIONAL_REDIS_URLS[info.field_name])
        return value

    @field_validator("queue_namespace", "sqs_region")
    @classmethod
    def _follows_the_answer_rule(cls, value: str, info: ValidationInfo) -> str:
        # The same rule as the question that gave the default (naming.py).
        problem = ANSWER_RULES[info.field_name].problem(value)
        if problem:
            raise ValueError(problem)
        return value

    @field_validator("log_level")
    @classmethod
    def _log_level_is_known(cls, value: str) -> str:
        if value.upper() not in LOG_LEVELS:
            raise ValueError(f"the log level must be one of: {', '.join(LOG_LEVELS)}")
        return value.upper()

    @field_validator("timezone")
    @classmethod
    def _timezone_is_known(cls, value: str) -> str:
        try:
            ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError(
                "the time zone must be an IANA name such as UTC or Europe/Madrid"
            ) from None
        return value

    @property
    def effective_broker_url(self) -> str:
        """BROKER_URL, or the local development broker for this project's broker."""
        return self.broker_url or DEFAULT_BROKER_URLS[self.broker]

    @property
    def effective_result_backend(self) -> str | None:
        """Where results are kept, or None: no result backend (fire-and-forget).

        A Django project that answered DJANGO_RESULTS keeps them in its database
        (django-celery-results); any other project in RESULT_BACKEND_URL.
        """
        if project.DJANGO_RESULTS:
            return DJANGO_RESULT_BACKEND
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
    def effective_task_max_eta(self) -> int:
        """TASK_MAX_ETA, else 900 s or TASK_RETRY_BACKOFF_MAX if longer.

        On Redis and SQS a message held past VISIBILITY_TIMEOUT is handed out
        again, so the unset bound stays below it there.
        """
        if self.task_max_eta is not None:
            return self.task_max_eta
        bound = max(DEFAULT_MAX_ETA, self.task_retry_backoff_max)
        if self.uses_visibility_timeout:
            bound = min(bound, self.visibility_timeout - 1)
        return bound

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
        # One chain for delays: TASK_RETRY_BACKOFF_MAX <= TASK_MAX_ETA < VISIBILITY_TIMEOUT.
        # Unset, TASK_MAX_ETA stays between them, so the backoff is what is compared.
        longest_delay = (
            ("TASK_MAX_ETA", self.task_max_eta)
            if self.task_max_eta is not None
            else ("TASK_RETRY_BACKOFF_MAX", self.task_retry_backoff_max)
        )
        if self.uses_visibility_timeout:
            for name, value in (("TASK_TIME_LIMIT", self.task_time_limit), longest_delay):
                if self.visibility_timeout <= value:
                    raise ValueError(
                        f"VISIBILITY_TIMEOUT ({self.visibility_timeout} s) must be longer than "
                        f"{name} ({value} s): the broker would hand a task that is still "
                        "running or waiting for its eta or retry to a second worker. Raise "
                        f"VISIBILITY_TIMEOUT or lower {name}."
                    )
        if self.task_retry_backoff_max > self.effective_task_max_eta:
            raise ValueError(
                f"TASK_RETRY_BACKOFF_MAX ({self.task_retry_backoff_max} s) must not be longer "
                f"than TASK_MAX_ETA ({self.effective_task_max_eta} s): a retry that far ahead "
                "would be dead-lettered as malformed. Raise TASK_MAX_ETA or lower "
                "TASK_RETRY_BACKOFF_MAX."
            )
        if self.broker_kind == "redis" and self.worker_heartbeat_ttl >= self.visibility_timeout:
            raise ValueError(
                f"WORKER_HEARTBEAT_TTL ({self.worker_heartbeat_ttl} s) must be shorter than "
                f"VISIBILITY_TIMEOUT ({self.visibility_timeout} s): it is how soon a stopped "
                "worker's jobs come back, and the visibility timeout is the last resort. Lower "
                "WORKER_HEARTBEAT_TTL."
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


_SETTINGS_FOR_BROKER: dict[str, type[Settings]] = {}


def check_url(url: str, schemes: tuple[str, ...], wanted: str) -> None:
    """Refuse a URL that is empty, of another scheme, or that does not parse as one."""
    if not url.strip():
        raise ValueError(f"is empty; set {wanted} or leave the variable unset")
    scheme, separator, _ = url.partition("://")
    if not separator or scheme.lower() not in schemes:
        shown = f"scheme {scheme!r}" if separator else "no scheme"
        raise ValueError(
            f"has {shown}; expected {wanted} ({', '.join(f'{s}://' for s in schemes)})"
        )
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - parsing the port is the check
    except ValueError:
        parts = None
    # An unencoded '/', '?' or '#' in the password ends the host part early: the
    # rest of the password then reads as a port, a path or a fragment.
    if parts is None or ("@" not in parts.netloc and "@" in url.partition("://")[2]):
        raise ValueError(
            "cannot be parsed as a URL; percent-encode the special characters of the "
            "user name and password ('/' as %2F, '#' as %23, '?' as %3F, '@' as %40, "
            "':' as %3A)"
        )


def mask_password(url: str) -> str:
    """Hide the password (or SQS secret) of a URL, also of one that does not parse."""
    scheme, separator, rest = url.partition("://")
    userinfo, at, host = rest.rpartition("@")
    if not separator or not at or ":" not in userinfo:
        return url
    user = userinfo.partition(":")[0]
    return f"{scheme}://{user}:***@{host}"


def shown_value(field: str, value: Any) -> str:
    """A setting's value as an error message shows it: quoted, with any password masked."""
    text = value if isinstance(value, str) else str(value)
    if field in URL_SETTINGS:
        text = mask_password(text)
    return repr(text)


def describe_validation_error(error: ValidationError, prefix: str = "") -> str:
    """One line per wrong setting: its variable, its value (masked) and the rule it breaks.

    `prefix`: the settings' environment prefix (HTTP_ for HTTP_TOKEN, ...).
    """
    lines = []
    for item in error.errors():
        field = str(item["loc"][0]) if item["loc"] else ""
        message = item["msg"].removeprefix("Value error, ")
        if not field:
            lines.append(message)
            continue
        where = prefix + "_".join(str(part) for part in item["loc"]).upper()
        lines.append(f"{where}={shown_value(field, item.get('input'))}: {message}")
    return "Invalid settings:\n  " + "\n  ".join(lines)


def describe_settings_error(error: SettingsError) -> str:
    """A value pydantic-settings could not even decode (LANE_PREFETCH that is not JSON)."""
    match = re.search(r'field "(\w+)"', str(error))
    if not match:
        return f"Invalid settings: {error}"
    field = match.group(1)
    name = field.upper()
    raw = os.environ.get(name)
    value = f"={shown_value(field, raw)}" if raw is not None else ""
    return (
        f"Invalid settings:\n  {name}{value}: is not valid JSON; write it as JSON, "
        'e.g. LANE_PREFETCH={"default": 4}'
    )


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process-wide settings, read once; bad settings raise ConfigurationError."""
    try:
        return Settings()
    except ValidationError as exc:
        raise ConfigurationError(describe_validation_error(exc)) from None
    except SettingsError as exc:
        raise ConfigurationError(describe_settings_error(exc)) from None
