"""The project's CLI, without a broker."""

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import typer
from bound import (
    PACKAGE,
    PROJECT_ROOT,
    UNREACHABLE_BROKER,
    answer_independent,
    with_a_visibility_timeout,
)
from typer.testing import CliRunner

from workergen_runtime import project
from workergen_runtime.cli.main import app
from workergen_runtime.worker.start import choose_pool, worker_argv

runner = CliRunner()


@answer_independent
def test_help_lists_the_queue_commands() -> None:
    result = runner.invoke(app, ["queue", "--help"])
    assert result.exit_code == 0
    for command in ("work", "dispatch", "lanes"):
        assert command in result.output


def test_lanes_shows_each_namespaced_queue(monkeypatch) -> None:
    result = runner.invoke(app, ["queue", "lanes"])
    assert result.exit_code == 0
    for lane in project.LANES:
        assert lane in result.output


@answer_independent
def test_windows_defaults_to_the_solo_pool_and_says_so() -> None:
    choice = choose_pool(None, "win32")
    assert choice.pool == "solo"
    assert "solo" in (choice.note or "")
    assert choose_pool(None, "linux").pool is None
    assert choose_pool("threads", "win32").pool == "threads"


def test_worker_consumes_namespaced_lanes_and_never_runs_the_scheduler() -> None:
    argv = worker_argv(lanes=["default", "batch"], loglevel="info", pool=None, namespace="ventas")
    assert argv[argv.index("--queues") + 1] == "ventas.default,ventas.batch"
    assert "--beat" not in argv and "-B" not in argv


def test_dispatch_with_the_broker_down_fails_fast_with_an_actionable_message(tmp_path) -> None:
    started = time.monotonic()
    done = run_cli(["queue", "dispatch", "hello"], tmp_path, BROKER_URL=UNREACHABLE_BROKER)
    assert done.returncode == 1
    assert "unavailable" in done.stderr and "BROKER_URL" in done.stderr
    assert "Traceback" not in done.stderr
    assert time.monotonic() - started < 30


# RabbitMQ has no visibility timeout for a prefetch to outwait.
@with_a_visibility_timeout
def test_a_prefetch_that_could_run_a_job_twice_is_refused_before_the_worker_starts(
    tmp_path,
) -> None:
    done = run_cli(
        ["queue", "work", "--prefetch", "20"],
        tmp_path,
        BROKER_URL=UNREACHABLE_BROKER,
        VISIBILITY_TIMEOUT="3600",
    )
    assert done.returncode == 1
    assert "--prefetch (20)" in done.stderr and "VISIBILITY_TIMEOUT" in done.stderr


# Commands that scaffold files and never read a setting.
SETTINGS_FREE = {"make:job", "make:cron"}
# Options without which a command refuses to run before it reads any setting.
NEEDED_OPTIONS = {("dlq", "purge"): ["--yes"], ("dlq", "replay"): ["--all"]}


def leaf_commands(command: Any, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Every command of the CLI, with a placeholder for each required argument."""
    if hasattr(command, "commands"):
        return [
            leaf
            for name, sub in sorted(command.commands.items())
            for leaf in leaf_commands(sub, (*path, name))
        ]
    required = [
        "x" for param in command.params if param.param_type_name == "argument" and param.required
    ]
    return [(*path, *required, *NEEDED_OPTIONS.get(path, []))]


COMMANDS = [
    command
    for command in leaf_commands(typer.main.get_command(app))
    if command[0] not in SETTINGS_FREE
]
BAD_SETTINGS = [
    ("QUEUE_NAMESPACE", "my ns", "my ns"),
    ("TASK_TIME_LIMIT", "-5", "-5"),
    ("LANE_PREFETCH", "not json", "not json"),
    ("BROKER_URL", "http://example.com", "http://example.com"),
    ("BROKER_URL", "", "is empty"),
]


def run_cli(args: list[str], cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", PACKAGE, *args],
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": str(PROJECT_ROOT), **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_every_command_that_reads_settings_is_listed() -> None:
    assert ("queue", "work") in COMMANDS and ("queue", "dispatch", "x") in COMMANDS
    assert len(COMMANDS) >= 8


@pytest.mark.parametrize("index", range(len(COMMANDS)), ids=lambda i: " ".join(COMMANDS[i]))
def test_bad_settings_are_one_short_message_on_every_command(index: int, tmp_path) -> None:
    # Each command gets one of the bad settings in turn; `queue work` gets them all below.
    name, value, shown = BAD_SETTINGS[index % len(BAD_SETTINGS)]
    done = run_cli(list(COMMANDS[index]), tmp_path, **{name: value})
    assert done.returncode == 1, (name, done.stdout, done.stderr)
    assert "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) <= 4, done.stderr
    assert name in done.stderr and shown in done.stderr


@pytest.mark.parametrize(("name", "value", "shown"), BAD_SETTINGS)
def test_each_bad_setting_names_the_variable_and_value(name, value, shown, tmp_path) -> None:
    done = run_cli(["queue", "work"], tmp_path, **{name: value})
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) <= 4, done.stderr
    assert f"{name}=" in done.stderr and shown in done.stderr


@pytest.mark.parametrize(
    "command",
    [
        # The top level lists `http` when the project has the HTTP front door: every run.
        pytest.param([], id="top"),
        *(
            pytest.param(command, id=" ".join(command), marks=answer_independent)
            for command in (["queue"], ["dlq"], ["schedule"], ["queue", "work"])
        ),
    ],
)
def test_help_works_with_bad_settings(command: list[str], tmp_path) -> None:
    done = run_cli([*command, "--help"], tmp_path, TASK_TIME_LIMIT="-5", BROKER_URL="garbage")
    assert done.returncode == 0, done.stderr
    assert "Usage" in done.stdout


def test_dispatch_with_arguments_the_job_does_not_take_is_one_line_and_sends_nothing(
    tmp_path,
) -> None:
    # The broker is unreachable: had anything been sent, the error would say so.
    for flag, value, reason in (
        ("--kwargs", '{"nope": 1}', "unexpected keyword argument 'nope'"),
        ("--args", '["a", "b"]', "too many positional arguments"),
    ):
        done = run_cli(
            ["queue", "dispatch", "hello", flag, value], tmp_path, BROKER_URL=UNREACHABLE_BROKER
        )
        assert done.returncode == 1
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1, done.stderr
        assert reason in lines[0] and "NOT queued" in lines[0]
        assert "unavailable" not in lines[0]
