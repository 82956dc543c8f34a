"""A bad setting is named as a setting, by every command, before any job module is imported:
never blamed on the job module that happened to read the settings first."""

from __future__ import annotations

import json

import pytest

from support.projects import Project

PACKAGE = "billing"

# A job module that reads the settings when it is imported, as user code may.
READS_SETTINGS = '''"""Reads a setting at import time."""

from workergen_runtime.settings import get_settings

NAMESPACE = get_settings().queue_namespace
'''

# One bad value of each setting of a Redis project.
BAD_VALUES = {
    "BROKER_URL": "amqp://guest:guest@localhost:5672//",
    "RESULT_BACKEND_URL": "http://localhost:6379/1",
    "LOCK_URL": "mysql://localhost/locks",
    "QUEUE_NAMESPACE": "NC Bad",
    "VISIBILITY_TIMEOUT": "0",
    "TASK_SOFT_TIME_LIMIT": "400",
    "TASK_TIME_LIMIT": "-1",
    "TASK_MAX_RETRIES": "-1",
    "TASK_RETRY_BACKOFF": "soon",
    "TASK_RETRY_BACKOFF_MAX": "-5",
    "IDEMPOTENCY_RETENTION": "0",
    "TASK_MAX_DELIVERIES": "0",
    "UNKNOWN_TASK_GRACE": "-1",
    "TASK_MAX_ETA": "0",
    "WORKER_HEARTBEAT_TTL": "1",
    "SCHEDULER_LEADER_TTL": "5",
    "WORKER_PREFETCH_MULTIPLIER": "0",
    "LANE_PREFETCH": "{default: 4",
    "WORKER_MAX_TASKS_PER_CHILD": "0",
    "WORKER_MAX_MEMORY_PER_CHILD": "lots",
    "LOG_LEVEL": "LOUD",
    "LOG_FORMAT": "xml",
    "LOG_EVERY_JOB": "perhaps",
    "TIMEZONE": "Mars/Olympus_Mons",
    "SQS_REGION": "Not A Region",
    "SQS_IS_SECURE": "perhaps",
    "SQS_WAIT_TIME_SECONDS": "21",
    "SQS_POLLING_INTERVAL": "0",
    "RABBITMQ_POLICY_PRIORITY": "-1",
    "METRICS_PORT": "70000",
}
# Settings of free text: no value of theirs is refused when the settings load.
FREE_TEXT = {"RABBITMQ_MANAGEMENT_URL", "MONITOR_BASIC_AUTH"}

# Every command that reads the settings (make:job and make:cron do not: they write files).
COMMANDS = [
    ["queue", "work"],
    ["queue", "dispatch", "hello"],
    ["queue", "lanes"],
    ["queue", "provision"],
    ["dlq", "list"],
    ["schedule", "work"],
    ["schedule", "run"],
    ["schedule", "list"],
    ["monitor"],
    ["doctor"],
]


@pytest.fixture(scope="module")
def project(render, tmp_path_factory: pytest.TempPathFactory) -> Project:
    rendered = render(broker="redis", result_backend="none", queue_namespace="billing")
    proj = Project.copy_of(
        rendered, tmp_path_factory.mktemp("bad") / PACKAGE, PACKAGE, BROKER_URL="memory://"
    )
    (proj.root / PACKAGE / "jobs" / "reads_settings.py").write_text(READS_SETTINGS)
    return proj


def assert_names_the_setting(done, setting: str) -> None:
    assert done.returncode != 0, done.stdout + done.stderr
    message = done.stderr
    assert "Traceback" not in message, message
    assert "Invalid settings" in message, message
    assert f"  {setting}" in message, message  # the line that names it
    assert f"{PACKAGE}.jobs" not in message, message
    assert len(message.strip().splitlines()) <= 4, message


def test_the_table_holds_every_setting(project: Project) -> None:
    done = project.python(
        "import json\n"
        f"import {PACKAGE}\n"
        "from workergen_runtime.settings import Settings\n"
        "print(json.dumps([name.upper() for name in Settings.model_fields]))\n"
    )
    assert done.returncode == 0, done.stderr
    assert set(json.loads(done.stdout)) == set(BAD_VALUES) | FREE_TEXT


@pytest.mark.parametrize("setting", sorted(BAD_VALUES))
def test_each_bad_setting_is_named_not_a_job_module(project: Project, setting: str) -> None:
    done = project.run("queue", "dispatch", "hello", **{setting: BAD_VALUES[setting]})
    assert_names_the_setting(done, setting)


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_every_command_names_the_bad_setting(project: Project, command: list[str]) -> None:
    done = project.run(*command, QUEUE_NAMESPACE="NC Bad", timeout=60)
    assert_names_the_setting(done, "QUEUE_NAMESPACE='NC Bad'")


def test_a_job_module_that_fails_on_its_own_is_still_named(project: Project) -> None:
    broken = project.root / PACKAGE / "jobs" / "broken.py"
    broken.write_text("import not_a_module_at_all\n")
    try:
        done = project.run("queue", "dispatch", "hello")
    finally:
        broken.unlink()
    assert done.returncode == 1
    assert f"Cannot import {PACKAGE}.jobs.broken: ModuleNotFoundError" in done.stderr
