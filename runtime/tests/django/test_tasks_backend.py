"""Django's Tasks framework on the worker runtime: what `.enqueue()` queues, and what runs it.

Against the sample Django project (sample/, its settings name the backend in
TASKS), whose `@task` functions are in accounts/tasks.py. In-process: messages
go to an in-process broker and are read back, results to the suite's Redis.
End to end: a worker of the sample project runs them on the run's broker.
"""

from __future__ import annotations

import json
import math
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from accounts import tasks as app_tasks
from celery.exceptions import InvalidTaskError
from django.test import override_settings
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st
from workers import SHARED_WORKER, dead_letter_recorded, manage, wait_for, work

from conftest import SharedWorker
from support.brokers import REDIS_URL, require_broker
from workergen_runtime import project
from workergen_runtime.celery_app import create_app
from workergen_runtime.deadletter import MALFORMED, DeadLetter, DeadLetterStore
from workergen_runtime.deadletter import routing as deadlettering
from workergen_runtime.django import tasks
from workergen_runtime.errors import JobArgumentsError
from workergen_runtime.settings import Settings
from workergen_runtime.worker.consumer import DeadLetterConsumer

try:
    from django.tasks import TaskResultStatus, task, task_backends
    from django.tasks.exceptions import InvalidTask, InvalidTaskBackend, TaskResultDoesNotExist
except ImportError:
    from django_tasks import TaskResultStatus, task, task_backends
    from django_tasks.exceptions import InvalidTaskBackendError as InvalidTaskBackend
    from django_tasks.exceptions import InvalidTaskError as InvalidTask
    from django_tasks.exceptions import TaskResultDoesNotExist

BACKEND = "workergen_runtime.django.tasks.WorkergenBackend"
NAMESPACE = "djtasks"
LANES = project.LANES


@task
def outside(value: int) -> int:
    """A task of a module that is no installed app's: never enqueued."""
    return value


def memory_app(**changes: Any) -> Any:
    return create_app(
        Settings(_env_file=None, broker_url="memory://", queue_namespace=NAMESPACE, **changes)
    )


@pytest.fixture
def use_app(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """Point the backend at an app of the test's choosing; yields a function that does it."""
    chosen: dict[str, Any] = {}
    monkeypatch.setattr(tasks, "project_app", lambda: chosen["app"])
    overridden: list[Any] = []

    def use(app: Any, **params: Any) -> Any:
        chosen["app"] = app
        change = override_settings(TASKS={"default": {"BACKEND": BACKEND, **params}})
        change.enable()
        overridden.append(change)
        return task_backends["default"]

    yield use
    for change in reversed(overridden):
        change.disable()


@pytest.fixture
def backend(use_app: Any) -> Any:
    return use_app(memory_app())


def taken(app: Any, lane: str) -> list[Any]:
    """The messages waiting on a lane of the in-process broker, taken off it."""
    messages = []
    with app.connection_for_read() as connection:
        queue = f"{NAMESPACE}.{lane}"
        while (message := connection.default_channel.basic_get(queue)) is not None:
            message.ack()
            messages.append(message)
    return messages


def only_message(app: Any, lane: str = "default") -> Any:
    messages = [m for name in LANES for m in taken(app, name)]
    assert len(messages) == 1, messages
    assert messages[0].delivery_info["routing_key"] == f"{NAMESPACE}.{lane}"
    return messages[0]


def nothing_queued(app: Any) -> bool:
    return not any(taken(app, lane) for lane in LANES)


# --- queue_name: a lane ----------------------------------------------------------------------


@pytest.mark.parametrize("lane", LANES)
def test_each_lane_is_a_queue_name_and_its_message_names_the_task(backend: Any, lane: str) -> None:
    result = app_tasks.add.using(queue_name=lane).enqueue(1, b=2)
    message = only_message(backend.app, lane)
    assert message.headers["task"] == tasks.TASK_JOB
    assert message.headers["id"] == result.id
    assert message.payload[:2] == [["accounts.tasks.add", [1], {"b": 2}], {}]
    assert (result.status, result.args, result.kwargs) == (TaskResultStatus.READY, [1], {"b": 2})


def test_a_queue_name_that_is_not_a_lane_is_refused_naming_the_lanes(backend: Any) -> None:
    with pytest.raises(InvalidTask) as refused:
        app_tasks.add.using(queue_name="emails").enqueue(1, 2)
    assert str(refused.value) == (
        f"Queue 'emails' is not a lane of this project. Its lanes are: {', '.join(LANES)}."
    )
    assert nothing_queued(backend.app)


def test_queues_narrow_the_lanes_a_task_may_use(use_app: Any) -> None:
    backend = use_app(memory_app(), QUEUES=["critical"])
    app_tasks.add.using(queue_name="critical").enqueue(1, 2)
    only_message(backend.app, "critical")
    with pytest.raises(InvalidTask, match=r"'default' is not in TASKS\['default'\]\['QUEUES'\]"):
        app_tasks.add.enqueue(1, 2)
    assert nothing_queued(backend.app)


def test_queues_that_name_no_lane_are_refused_as_the_backend_is_made(use_app: Any) -> None:
    with pytest.raises(InvalidTaskBackend) as refused:
        use_app(memory_app(), QUEUES=["default", "emails"])
    assert "'emails', which is not a lane of this project" in str(refused.value)
    assert f"Its lanes are: {', '.join(LANES)}." in str(refused.value)


# --- priority: where the broker keeps it -----------------------------------------------------

PRIORITIES = (-101, -100, -51, -50, -1, 0, 1, 100, 101)


def test_every_priority_has_its_redis_step_higher_first() -> None:
    steps = [tasks.redis_priority(priority) for priority in range(-100, 101)]
    assert steps == [9] * 50 + [6] * 50 + [3] + [0] * 100
    # Larger priorities run sooner: kombu takes the lower step first.
    assert steps == sorted(steps, reverse=True)


def test_every_priority_is_kept_only_where_the_broker_keeps_it(use_app: Any) -> None:
    # The project's own broker (its default URL): the backend asks nothing of it yet.
    backend = use_app(create_app(Settings(_env_file=None, queue_namespace=NAMESPACE)))
    assert backend.supports_priority is (project.BROKER == "redis")
    reason = {
        "redis": None,
        "rabbitmq": "RabbitMQ lanes are declared without x-max-priority",
        "sqs": "SQS queues have no priorities",
    }[project.BROKER]
    for priority in range(-101, 102):
        if priority != 0 and reason:
            with pytest.raises(InvalidTask) as refused:
                app_tasks.add.using(priority=priority)
            assert str(refused.value) == (
                f"Priority {priority} cannot be kept: {reason}, so RabbitMQ ignores priorities. "
                "Leave the priority at 0."
                if project.BROKER == "rabbitmq"
                else f"Priority {priority} cannot be kept: {reason}. Leave the priority at 0."
            )
        elif not -100 <= priority <= 100:
            with pytest.raises(InvalidTask, match="priority must be a whole number between"):
                app_tasks.add.using(priority=priority)
        else:
            assert app_tasks.add.using(priority=priority).priority == priority


@pytest.mark.parametrize("priority", PRIORITIES[1:-1])
def test_a_priority_goes_on_the_message_as_its_redis_step(use_app: Any, priority: int) -> None:
    backend = use_app(memory_app())
    # The in-process broker stands in for Redis here; the real one orders by it
    # (the end-to-end tests).
    backend.broker_kind, backend.supports_priority = "redis", True
    app_tasks.add.using(priority=priority).enqueue(1, 2)
    message = only_message(backend.app)
    assert message.properties["priority"] == tasks.redis_priority(priority)


def test_without_priorities_a_priority_is_refused_before_anything_is_sent(backend: Any) -> None:
    assert backend.supports_priority is False  # the in-process broker has none
    with pytest.raises(InvalidTask, match="this broker has no priorities"):
        app_tasks.add.using(priority=5).enqueue(1, 2)
    assert nothing_queued(backend.app)


# --- run_after: a delayed job ----------------------------------------------------------------


def test_run_after_becomes_the_jobs_eta(backend: Any) -> None:
    limit = backend.app.settings.effective_task_max_eta
    now = datetime.now(UTC)
    for when in (now - timedelta(hours=1), now + timedelta(seconds=limit - 60)):
        app_tasks.add.using(run_after=when).enqueue(1, 2)
        assert only_message(backend.app).headers["eta"] == when.isoformat()
    app_tasks.add.enqueue(1, 2)
    assert only_message(backend.app).headers["eta"] is None


def test_run_after_beyond_task_max_eta_is_refused_and_nothing_is_queued(backend: Any) -> None:
    limit = backend.app.settings.effective_task_max_eta
    far = datetime.now(UTC) + timedelta(seconds=limit + 60)
    with pytest.raises(InvalidTask, match=r"beyond TASK_MAX_ETA .* The job was NOT queued"):
        app_tasks.add.using(run_after=far).enqueue(1, 2)
    assert nothing_queued(backend.app)


def test_run_after_must_be_aware(backend: Any) -> None:
    with pytest.raises(InvalidTask, match="run_after must be an aware datetime"):
        app_tasks.add.using(run_after=datetime.now() + timedelta(minutes=1))


# --- arguments: JSON, and what the function takes --------------------------------------------

ARGUMENTS = [
    pytest.param((1, 2), {}, ([1, 2], {}), id="plain"),
    pytest.param(((1, 2),), {}, ([[1, 2]], {}), id="tuple-becomes-list"),
    pytest.param((b"abc",), {}, (["abc"], {}), id="bytes-become-text"),
    pytest.param(({"a": [None, True, 1.5]},), {}, ([{"a": [None, True, 1.5]}], {}), id="nested"),
    pytest.param(({1: "a"},), {}, TypeError, id="key-not-text"),
    pytest.param((object(),), {}, TypeError, id="not-json"),
    pytest.param((datetime.now(UTC),), {}, TypeError, id="datetime"),
    pytest.param((math.nan,), {}, ValueError, id="nan"),
    pytest.param((b"\xff",), {}, ValueError, id="bytes-not-utf8"),
]


@pytest.mark.parametrize(("args", "kwargs", "expected"), ARGUMENTS)
def test_arguments_are_json_as_django_takes_them(
    backend: Any, args: tuple, kwargs: dict, expected: Any
) -> None:
    if isinstance(expected, type):
        with pytest.raises(expected):
            app_tasks.echo.enqueue(*args, **kwargs)
        assert nothing_queued(backend.app)
        return
    target = app_tasks.add if len(args) == 2 else app_tasks.echo
    result = target.enqueue(*args, **kwargs)
    assert (result.args, result.kwargs) == expected
    path = f"accounts.tasks.{target.name}"
    assert only_message(backend.app).payload[0] == [path, *expected]


def test_arguments_the_function_cannot_take_are_refused(backend: Any) -> None:
    with pytest.raises(
        JobArgumentsError, match=r"accounts.tasks.add does not accept .* NOT queued"
    ):
        app_tasks.add.enqueue(1, 2, 3)
    with pytest.raises(JobArgumentsError):
        app_tasks.add.enqueue(1, c=2)
    # The context is the worker's to give, not the caller's.
    app_tasks.attempt.enqueue("hi")
    assert only_message(backend.app).payload[0] == ["accounts.tasks.attempt", ["hi"], {}]
    assert nothing_queued(backend.app)


def test_a_task_outside_the_installed_apps_is_refused(backend: Any) -> None:
    with pytest.raises(InvalidTask, match="is not in a module of an installed app"):
        outside.enqueue(1)
    assert nothing_queued(backend.app)


JSON_LIKE = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text() | st.binary(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.tuples(inner, inner)
        | st.dictionaries(st.text() | st.integers(), inner, max_size=4)
    ),
    max_leaves=12,
)


@hypothesis_settings(max_examples=150, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(value=JSON_LIKE)
def test_what_the_task_gets_is_what_its_result_shows(backend: Any, value: Any) -> None:
    try:
        result = app_tasks.echo.enqueue(value)
    except (TypeError, ValueError):
        assert nothing_queued(backend.app)
        return
    sent = only_message(backend.app).payload[0]
    assert sent == ["accounts.tasks.echo", result.args, result.kwargs]
    assert json.loads(json.dumps(result.args, allow_nan=False)) == result.args


# --- results ---------------------------------------------------------------------------------


def test_without_a_result_backend_results_cannot_be_read(backend: Any) -> None:
    assert backend.supports_get_result is False
    result = app_tasks.add.enqueue(1, 2)
    with pytest.raises(NotImplementedError, match=r"no result backend .*RESULT_BACKEND_URL"):
        app_tasks.add.get_result(result.id)


@pytest.fixture
def with_results(use_app: Any) -> Iterator[Any]:
    require_broker("redis", REDIS_URL)
    backend = use_app(memory_app(result_backend_url=REDIS_URL))
    enqueued: list[str] = []
    tasks.task_enqueued.connect(
        lambda task_result, **_: enqueued.append(task_result.id),
        weak=False,
        dispatch_uid="djtasks-results",
    )
    yield backend
    tasks.task_enqueued.disconnect(dispatch_uid="djtasks-results")
    client = backend.app.backend.client
    for result_id in enqueued:
        for key in (result_id, result_id + tasks.RECORD_SUFFIX):
            client.delete(backend.app.backend.get_key_for_task(key))


def test_a_result_is_read_from_the_result_backend(with_results: Any) -> None:
    backend = with_results
    assert backend.supports_get_result is True
    done = app_tasks.add.enqueue(1, 2)
    failed = app_tasks.fail.enqueue("no")
    waiting = app_tasks.add.enqueue(3, 4)
    read = app_tasks.add.get_result(waiting.id)
    assert (read.status, read.args, read.enqueued_at) == (
        TaskResultStatus.READY,
        [3, 4],
        waiting.enqueued_at,
    )
    backend.app.backend.mark_as_done(done.id, 3)
    try:
        raise ValueError("no")
    except ValueError as exc:
        backend.app.backend.mark_as_failure(failed.id, exc, traceback="Traceback: no")
    ok = app_tasks.add.get_result(done.id)
    assert (ok.status, ok.return_value, ok.args) == (TaskResultStatus.SUCCESSFUL, 3, [1, 2])
    assert ok.finished_at is not None
    bad = app_tasks.fail.get_result(failed.id)
    assert bad.status == TaskResultStatus.FAILED
    assert [(e.exception_class_path, e.traceback) for e in bad.errors] == [
        ("builtins.ValueError", "Traceback: no")
    ]
    with pytest.raises(TaskResultDoesNotExist):
        backend.get_result(str(uuid.uuid4()))


# --- the worker's side -----------------------------------------------------------------------


def run(backend: Any, path: str, *args: Any, **kwargs: Any) -> Any:
    """Run the task job in this process, as a worker process would run it."""
    return backend.job.apply(args=[path, list(args), kwargs])


def test_the_job_runs_the_task_sync_async_and_with_its_context(backend: Any) -> None:
    assert run(backend, "accounts.tasks.add", 1, b=2).get() == 3
    assert run(backend, "accounts.tasks.shout", "hi").get() == "HI"
    ran = run(backend, "accounts.tasks.attempt", "note")
    assert ran.get() == {"id": ran.id, "attempt": 1, "note": "note"}


@pytest.mark.parametrize(
    ("path", "problem"),
    [
        ("os.system", "'os.system' is not in a module of an installed app"),
        ("accountsx.tasks.add", "is not in a module of an installed app"),
        ("accounts.tasks.not_a_task", "'accounts.tasks.not_a_task' is not a @task function"),
        ("accounts.tasks.missing", "is not a @task function"),
        ("accounts", "is not a dotted Python name"),
        ("accounts.tasks.add()", "is not a dotted Python name"),
    ],
)
def test_the_job_runs_only_tasks_of_installed_apps(backend: Any, path: str, problem: str) -> None:
    ran = run(backend, path, 1)
    assert ran.failed()
    assert isinstance(ran.result, InvalidTask)
    assert problem in str(ran.result)


def test_a_failing_task_fails_its_job(backend: Any) -> None:
    ran = run(backend, "accounts.tasks.fail", "broken")
    assert ran.failed() and isinstance(ran.result, ValueError)


class MemoryStore(DeadLetterStore):
    """Keeps dead letters in a list."""

    def __init__(self) -> None:
        self.letters: list[DeadLetter] = []

    def record(self, letter: DeadLetter) -> None:
        self.letters.append(letter)

    def list(self, lane=None):
        return self.letters

    def show(self, letter_id):
        raise NotImplementedError

    def replay(self, letter_id):
        raise NotImplementedError

    def purge(self, lane=None):
        return 0


def consumer(app: Any) -> DeadLetterConsumer:
    """The worker's consumer, for its message callbacks only: no connection, no blueprint."""
    instance = DeadLetterConsumer.__new__(DeadLetterConsumer)
    instance.app = app
    instance.connection_errors = ()
    instance.hostname = "tests@host"
    return instance


class Message:
    """A task message as the worker's request reads it."""

    def __init__(self, args: list[Any]) -> None:
        self.body = json.dumps([args, {}, None]).encode()
        self.content_type = "application/json"
        self.content_encoding = "utf-8"
        self.headers = {"id": "t-1", "task": tasks.TASK_JOB}
        self.properties: dict = {}
        self.delivery_info = {"routing_key": f"{project.DEFAULT_NAMESPACE}.default"}
        self.acked = False

    @property
    def payload(self) -> Any:
        return json.loads(self.body)

    def ack(self) -> None:
        self.acked = True


@pytest.mark.parametrize(
    "args",
    [
        ["os.system", ["true"], {}],
        ["builtins.eval", ["1"], {}],
        [1, [], {}],
        ["accounts.tasks.add", {"a": 1}, []],
        ["accounts.tasks.add"],
        [],
    ],
)
def test_a_message_naming_anything_else_is_dead_lettered_as_malformed(
    backend: Any, monkeypatch: pytest.MonkeyPatch, args: list[Any]
) -> None:
    store = MemoryStore()
    monkeypatch.setattr(deadlettering, "dead_letter_store", lambda _app: store)
    message = Message(args)
    # Celery's consumer hands what the request raises to on_invalid_task.
    with pytest.raises(InvalidTaskError) as refused:
        tasks.TaskRequest(message, app=backend.app, task=backend.job)
    consumer(backend.app).on_invalid_task(None, message, refused.value)
    assert message.acked
    [letter] = store.letters
    assert (letter.reason, letter.task_name) == (MALFORMED, tasks.TASK_JOB)
    assert letter.exception.startswith("InvalidTaskError: ")


def test_a_message_naming_a_task_of_an_installed_app_is_taken(backend: Any) -> None:
    request = tasks.TaskRequest(
        Message(["accounts.tasks.add", [1, 2], {}]), app=backend.app, task=backend.job
    )
    assert request.args == ["accounts.tasks.add", [1, 2], {}]


# --- end to end: a worker of the sample project ----------------------------------------------

# The priority test starts a worker of its own; the others share the session's
# (conftest.py's fixture `worker`).
WAIT = 60


@pytest.mark.skipif(
    project.BROKER != "redis", reason="Redis only: the other brokers have no priorities"
)
@pytest.mark.django_db(transaction=True)
def test_on_redis_the_higher_priority_runs_first(tmp_path: Path) -> None:
    # Before the shared worker starts (this test comes first): it would take them as sent.
    assert not SHARED_WORKER, "run the priority test before the tests that share a worker"
    row = account("order@example.com")
    for priority in (-100, 0, 100, -10):
        app_tasks.append.using(priority=priority).enqueue(row.pk, str(priority))
    # Queued before the worker starts: it takes them one at a time, by priority.
    # Stopped while the shared worker starts: that one waits for it to be gone.
    with work(tmp_path, stop_later=True):
        wait_for(lambda: len(reloaded(row).note.split()) == 4, WAIT, "the four tasks")
    assert row.note.split() == ["100", "0", "-10", "-100"]


def dead_letter(task_id: str) -> dict[str, Any]:
    """The dead letter of a job as `manage.py workergen dlq list --json` shows it, once
    the worker recorded it (waited for in this process: a `manage.py` each time is slow)."""
    dead_letter_recorded(task_id, WAIT)
    listed = manage("dlq", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    letters = [json.loads(line) for line in listed.stdout.splitlines() if line.strip()]
    letter = next((letter for letter in letters if letter["task_id"] == task_id), None)
    assert letter is not None, f"dlq list --json does not list job {task_id}: {listed.stdout}"
    return letter


def account(email: str) -> Any:
    from accounts.models import Account

    return Account.objects.create(email=email)


def reloaded(row: Any) -> Any:
    row.refresh_from_db()
    return row


@pytest.mark.django_db(transaction=True)
def test_a_task_runs_on_the_worker_beside_a_job(worker: SharedWorker) -> None:
    from accounts.jobs.welcome import welcome

    row = account("task@example.com")
    result = app_tasks.note.enqueue(row.pk, "from a task")  # the critical lane
    welcome.dispatch(row.pk)
    wait_for(lambda: reloaded(row).note == "from a task" and row.welcomed, WAIT, "both ran")
    assert result.status == TaskResultStatus.READY  # no result backend in this run


@pytest.mark.django_db(transaction=True)
def test_an_async_task_runs_on_the_worker(worker: SharedWorker) -> None:
    row = account("async@example.com")
    app_tasks.note_later.enqueue(row.pk, "awaited")
    wait_for(lambda: reloaded(row).note == "awaited", WAIT, "the async task")


@pytest.mark.django_db(transaction=True)
def test_a_task_runs_after_its_run_after(worker: SharedWorker) -> None:
    row = account("later@example.com")
    app_tasks.note.enqueue(row.pk, "warm")  # the worker is up once this ran
    wait_for(lambda: reloaded(row).note == "warm", WAIT, "the first task")
    queued = time.monotonic()
    app_tasks.note.using(run_after=datetime.now(UTC) + timedelta(seconds=2)).enqueue(row.pk, "late")
    wait_for(lambda: reloaded(row).note == "late", WAIT, "the delayed task")
    assert time.monotonic() - queued >= 1.5


@pytest.mark.django_db(transaction=True)
def test_a_failing_task_is_a_dead_letter_in_dlq_list(worker: SharedWorker) -> None:
    result = app_tasks.fail.enqueue("broken on purpose")
    letter = dead_letter(result.id)
    assert (letter["task_name"], letter["reason"]) == (tasks.TASK_JOB, "failed")
    assert letter["exception"] == "ValueError: broken on purpose"
    assert letter["args"] == ["accounts.tasks.fail", ["broken on purpose"], {}]


@pytest.mark.django_db(transaction=True)
def test_a_message_naming_another_module_is_dead_lettered_unrun(
    worker: SharedWorker, tmp_path: Path
) -> None:
    touched = tmp_path / "touched"
    job = task_backends["default"].job
    sent = job.dispatch_with(args=["os.system", [f"touch {touched}"], {}])
    letter = dead_letter(sent.id)
    assert letter["reason"] == MALFORMED
    assert "'os.system' is not in a module of an installed app" in letter["exception"]
    assert not touched.exists()
