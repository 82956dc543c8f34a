"""Django's Tasks framework on the worker runtime: `@task` functions run as jobs.

With

    TASKS = {"default": {"BACKEND": "workergen_runtime.django.tasks.WorkergenBackend",
                         "QUEUES": ["default", "critical"]}}

`my_task.enqueue(...)` queues one message for the runtime's job `TASK_JOB`,
whose arguments are the task's module path, its arguments and its keyword
arguments. A worker runs it like any job: JSON only, acknowledged late, within
the time limits, and dead-lettered when it raises. Each field of a task maps
to the runtime's own:

- `queue_name`: the lane (QUEUES may name only the project's lanes);
- `run_after`: the job's eta, within TASK_MAX_ETA;
- `priority`: kombu's priority steps on Redis; RabbitMQ lanes (declared
  without x-max-priority) and SQS have none, so there it must stay 0;
- the result: read from the Celery result backend (RESULT_BACKEND_URL), if any.

A message names the function it runs: the worker runs only a `@task` of this
backend defined in a module of an installed app, and dead-letters any other
message as `malformed` before it reaches a worker process.

Works with Django's own `django.tasks` (Django 6.0 and later) and with the
`django-tasks` backport.
"""

from __future__ import annotations

import importlib
import inspect
import math
import uuid
from collections.abc import Iterable
from datetime import UTC, datetime
from traceback import format_exception
from typing import Any

from celery import states
from celery.exceptions import InvalidTaskError
from django.apps import apps as django_apps
from django.utils import timezone

from workergen_runtime.deadletter.routing import DeadLetterRequest
from workergen_runtime.dispatch import broker_guard
from workergen_runtime.errors import DelayTooLongError, JobArgumentsError
from workergen_runtime.jobs import Job
from workergen_runtime.queues import DEFAULT_LANE
from workergen_runtime.retry import retry_policy

try:  # Django 6.0 and later
    from django.tasks import TaskContext, TaskResult, TaskResultStatus
    from django.tasks.backends.base import BaseTaskBackend
    from django.tasks.base import Task, TaskError
    from django.tasks.exceptions import InvalidTask, InvalidTaskBackend, TaskResultDoesNotExist
    from django.tasks.signals import task_enqueued, task_finished, task_started
    from django.utils.json import normalize_json
except ImportError:  # the django-tasks backport
    from django_tasks import TaskContext, TaskResult, TaskResultStatus
    from django_tasks.backends.base import BaseTaskBackend
    from django_tasks.base import Task, TaskError
    from django_tasks.exceptions import InvalidTaskBackendError as InvalidTaskBackend
    from django_tasks.exceptions import InvalidTaskError as InvalidTask
    from django_tasks.exceptions import TaskResultDoesNotExist
    from django_tasks.signals import task_enqueued, task_finished, task_started
    from django_tasks.utils import normalize_json

# The one job that runs every task: its arguments are [module path, args, kwargs].
TASK_JOB = "workergen.django_task"
# A module path is a dotted Python name; longer than this it is not a task's.
MAX_PATH_LENGTH = 200
# Where the enqueued task is recorded in the result backend, beside its result.
RECORD_SUFFIX = ".enqueued"

# Django's priorities (-100..100, larger sooner) onto kombu's Redis steps (0 first, 9 last).
# Jobs dispatched without a priority are on step 0, with the highest tasks.
REDIS_PRIORITY_STEPS = ((1, 0), (0, 3), (-50, 6), (-100, 9))

NO_PRIORITIES = {
    "amqp": "RabbitMQ lanes are declared without x-max-priority, so RabbitMQ ignores priorities",
    "sqs": "SQS queues have no priorities",
}

# Celery's states, as the framework's.
STATUSES = {
    states.PENDING: TaskResultStatus.READY,
    states.RECEIVED: TaskResultStatus.READY,
    states.RETRY: TaskResultStatus.READY,
    states.STARTED: TaskResultStatus.RUNNING,
    states.SUCCESS: TaskResultStatus.SUCCESSFUL,
    states.FAILURE: TaskResultStatus.FAILED,
    states.REVOKED: TaskResultStatus.FAILED,
    states.REJECTED: TaskResultStatus.FAILED,
}


def project_app() -> Any:
    """The Celery app tasks are queued with: the runtime's own."""
    from workergen_runtime.celery_app import app

    return app


def redis_priority(priority: int) -> int:
    """The kombu Redis priority of a task's priority: four steps, the highest first."""
    for lowest, step in REDIS_PRIORITY_STEPS:
        if priority >= lowest:
            return step
    return REDIS_PRIORITY_STEPS[-1][1]


def app_modules() -> list[str]:
    """The modules of the installed apps: a task's module must be one of them or below one."""
    return [config.name for config in django_apps.get_app_configs()]


def path_problem(path: Any, modules: Iterable[str]) -> str | None:
    """Why a module path may not name a task to run, or None.

    Only names are checked: nothing is imported.
    """
    if not isinstance(path, str) or not path:
        return f"the task's module path must be a non-empty string, not {type(path).__name__}"
    if len(path) > MAX_PATH_LENGTH:
        return f"the task's module path is longer than {MAX_PATH_LENGTH} characters"
    module = path.rpartition(".")[0]
    if not module or not all(part.isidentifier() for part in path.split(".")):
        return f"{path!r} is not a dotted Python name <module>.<function>"
    if not any(module == app or module.startswith(f"{app}.") for app in modules):
        return (
            f"{path!r} is not in a module of an installed app: the worker runs only tasks "
            "defined in INSTALLED_APPS"
        )
    return None


def resolve(path: str) -> Task:
    """The `@task` of this backend that a module path names; raises InvalidTask otherwise."""
    problem = path_problem(path, app_modules())
    if problem:
        raise InvalidTask(problem)
    module, _, name = path.rpartition(".")
    found = getattr(importlib.import_module(module), name, None)
    if not isinstance(found, Task) or f"{found.func.__module__}.{found.func.__qualname__}" != path:
        raise InvalidTask(f"{path!r} is not a @task function")
    if not isinstance(found.get_backend(), WorkergenBackend):
        raise InvalidTask(f"{path!r} is a task of backend {found.backend!r}, not of the worker's")
    return found


class TaskRequest(DeadLetterRequest):
    """The request of a task message: one naming anything but an installed app's task is refused.

    Checked in the worker's main process, as the message is taken: Celery's
    consumer hands an InvalidTaskError to the worker's consumer, which
    dead-letters the message as `malformed`; nothing is imported for it.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        call = self.args
        if (
            isinstance(call, list | tuple)
            and len(call) == 3
            and isinstance(call[1], list)
            and isinstance(call[2], dict)
        ):
            problem = path_problem(call[0], app_modules())
        else:
            problem = "a task message's arguments are [module path, [args], {kwargs}]"
        if problem:
            raise InvalidTaskError(problem)


def run_task(job: Job, path: str, args: list[Any], kwargs: dict[str, Any]) -> Any:
    """Run the `@task` at `path` (the worker's side): its return value, as JSON."""
    task = resolve(path)
    request = job.request
    now = timezone.now()
    result = task_result(
        task,
        request.id,
        TaskResultStatus.RUNNING,
        args,
        kwargs,
        backend=task.backend,
        started_at=now,
        last_attempted_at=now,
        worker_ids=[request.hostname or ""] * ((request.retries or 0) + 1),
    )
    backend = type(task.get_backend())
    task_started.send(sender=backend, task_result=result)
    try:
        if task.takes_context:
            value = task.call(TaskContext(task_result=result), *args, **kwargs)
        else:
            value = task.call(*args, **kwargs)
        value = json_value(value)
    except BaseException as exc:
        object.__setattr__(result, "status", TaskResultStatus.FAILED)
        object.__setattr__(result, "finished_at", timezone.now())
        result.errors.append(task_error(type(exc), "".join(format_exception(exc))))
        task_finished.send(sender=backend, task_result=result)
        raise
    object.__setattr__(result, "status", TaskResultStatus.SUCCESSFUL)
    object.__setattr__(result, "finished_at", timezone.now())
    object.__setattr__(result, "_return_value", value)
    task_finished.send(sender=backend, task_result=result)
    return value


def task_result(
    task: Task, result_id: str, status: Any, args: Any, kwargs: Any, **fields: Any
) -> TaskResult:
    """The framework's TaskResult; the times, errors and workers not given are unknown."""
    known: dict[str, Any] = {
        "enqueued_at": None,
        "started_at": None,
        "finished_at": None,
        "last_attempted_at": None,
        "errors": [],
        "worker_ids": [],
        **fields,
    }
    return TaskResult(task=task, id=result_id, status=status, args=args, kwargs=kwargs, **known)


def task_error(kind: type[BaseException], traceback: str) -> TaskError:
    return TaskError(
        exception_class_path=f"{kind.__module__}.{kind.__qualname__}", traceback=traceback
    )


def json_value(value: Any) -> Any:
    """A value as Django's tasks take it (normalize_json), which JSON keeps as it is.

    Django turns tuples into lists and bytes into text; JSON would also turn a
    key that is not a string into one, and has no NaN or infinity: those are
    refused, so what the task gets is what the TaskResult shows.
    """
    value = normalize_json(value)
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            for key in item:
                if not isinstance(key, str):
                    raise TypeError(f"JSON object keys are strings, not {type(key).__name__}")
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, float) and not math.isfinite(item):
            raise ValueError(f"JSON has no {item!r}")
    return value


def register_job(app: Any) -> Job:
    """Register the job that runs tasks on `app` (the runtime's own app, at import)."""
    if TASK_JOB in app.tasks:
        return app.tasks[TASK_JOB]

    def django_task(self: Job, path: str, args: list[Any], kwargs: dict[str, Any]) -> Any:
        return run_task(self, path, args, kwargs)

    return app.task(
        django_task,
        name=TASK_JOB,
        base=Job,
        bind=True,
        shared=False,
        lane=DEFAULT_LANE,
        Request=f"{__name__}:TaskRequest",
        **retry_policy((), settings=app.settings),
    )


class WorkergenBackend(BaseTaskBackend):
    """Django's task backend that queues each task as a job of the project's worker."""

    supports_defer = True
    # An async task function is run to its end on the worker (Task.call).
    supports_async_task = True

    def __init__(self, alias: str, params: dict[str, Any]) -> None:
        super().__init__(alias, params)
        from workergen_runtime import project

        self.app = project_app()
        self.job = register_job(self.app)
        lanes = tuple(project.LANES)
        # Unset or empty: every lane of the project.
        self.queues = set(params.get("QUEUES") or lanes)
        unknown = sorted(self.queues - set(lanes))
        if unknown:
            raise InvalidTaskBackend(
                f"TASKS[{alias!r}]['QUEUES'] names {', '.join(map(repr, unknown))}, which "
                f"{'is not a lane' if len(unknown) == 1 else 'are not lanes'} of this project. "
                f"Its lanes are: {', '.join(lanes)}."
            )
        settings = self.app.settings
        self.broker_kind = settings.broker_kind
        self.supports_priority = self.broker_kind == "redis"
        # RESULT_BACKEND_URL, or django-celery-results' backend (DJANGO_RESULTS).
        conf = self.app.conf
        self.supports_get_result = bool(conf.result_backend) and not conf.task_ignore_result

    def validate_task(self, task: Task) -> None:
        from workergen_runtime import project

        if task.queue_name not in project.LANES:
            raise InvalidTask(
                f"Queue {task.queue_name!r} is not a lane of this project. "
                f"Its lanes are: {', '.join(project.LANES)}."
            )
        if task.queue_name not in self.queues:
            raise InvalidTask(
                f"Queue {task.queue_name!r} is not in TASKS[{self.alias!r}]['QUEUES'] "
                f"({', '.join(sorted(self.queues))})."
            )
        if not self.supports_priority and task.priority != 0:
            why = NO_PRIORITIES.get(self.broker_kind, "this broker has no priorities")
            raise InvalidTask(
                f"Priority {task.priority} cannot be kept: {why}. Leave the priority at 0."
            )
        super().validate_task(task)

    def enqueue(self, task: Task, args: Any, kwargs: Any) -> TaskResult:
        self.validate_task(task)
        path = f"{task.func.__module__}.{task.func.__qualname__}"
        problem = path_problem(path, app_modules())
        if problem:
            raise InvalidTask(problem)
        args, kwargs = json_value(list(args)), json_value(dict(kwargs))
        self.check_signature(task, path, args, kwargs)
        result = task_result(
            task,
            str(uuid.uuid4()),
            TaskResultStatus.READY,
            args,
            kwargs,
            backend=self.alias,
            enqueued_at=timezone.now(),
        )
        options: dict[str, Any] = {"task_id": result.id, "lane": task.queue_name}
        if task.run_after is not None:
            options["eta"] = task.run_after
            try:
                self.job.check_delay(options)
            except DelayTooLongError as exc:
                raise InvalidTask(str(exc)) from None
        if self.supports_priority:
            options["priority"] = redis_priority(task.priority)
        if self.supports_get_result:
            self.record(result, path)
        self.job.dispatch_with(args=[path, args, kwargs], **options)
        task_enqueued.send(sender=type(self), task_result=result)
        return result

    @staticmethod
    def check_signature(task: Task, path: str, args: list[Any], kwargs: dict[str, Any]) -> None:
        """Refuse arguments the task function cannot take, before anything is sent."""
        signature = inspect.signature(task.func)
        context = [None] if task.takes_context else []
        try:
            signature.bind(*context, *args, **kwargs)
        except TypeError as exc:
            raise JobArgumentsError(job=path, reason=str(exc), signature=str(signature)) from None

    def record(self, result: TaskResult, path: str) -> None:
        """Keep what was enqueued in the result backend, for get_result (expires with results)."""
        enqueued = {
            "path": path,
            "args": result.args,
            "kwargs": result.kwargs,
            "enqueued_at": result.enqueued_at.isoformat(),
        }
        with broker_guard(self.app.settings):
            self.app.backend.store_result(result.id + RECORD_SUFFIX, enqueued, states.PENDING)

    def get_result(self, result_id: str) -> TaskResult:
        if not self.supports_get_result:
            raise NotImplementedError(
                "Results cannot be read: the project has no result backend (RESULT_BACKEND_URL "
                "is empty), so a worker keeps no result. Set RESULT_BACKEND_URL (or answer "
                "DJANGO_RESULTS = True) to keep them."
            )
        backend = self.app.backend
        with broker_guard(self.app.settings):
            enqueued = backend.get_task_meta(result_id + RECORD_SUFFIX).get("result")
            meta = backend.get_task_meta(result_id)
        if not isinstance(enqueued, dict) or not isinstance(enqueued.get("path"), str):
            raise TaskResultDoesNotExist(result_id)
        task = resolve(enqueued["path"])
        status = STATUSES.get(meta.get("status"), TaskResultStatus.READY)
        finished = status in (TaskResultStatus.SUCCESSFUL, TaskResultStatus.FAILED)
        finished_at = parse_time(meta.get("date_done")) if finished else None
        error = meta.get("result")
        failed = status == TaskResultStatus.FAILED and isinstance(error, BaseException)
        result = task_result(
            task,
            result_id,
            status,
            enqueued.get("args") or [],
            enqueued.get("kwargs") or {},
            backend=self.alias,
            enqueued_at=parse_time(enqueued.get("enqueued_at")),
            finished_at=finished_at,
            last_attempted_at=finished_at,
            errors=[task_error(type(error), meta.get("traceback") or "")] if failed else [],
        )
        if status == TaskResultStatus.SUCCESSFUL:
            object.__setattr__(result, "_return_value", meta.get("result"))
        return result


def parse_time(value: Any) -> datetime | None:
    """A time the result backend gave (a datetime or ISO 8601 text), aware; None otherwise."""
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value)
        except ValueError:
            return None
    if not isinstance(value, datetime):
        return None
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


# Registered as the module is imported: a worker that imports it runs tasks.
register_job(project_app())
