"""`queue work` starts without the modules of the other commands: every module imported in the
worker's main process before the pool forks is counted again in each pool process's memory."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

PACKAGE = "billing"
# Modules of other commands (scaffolding, doctor, dead letters, monitor, scheduler CLI) and
# the libraries only they or a help screen use.
NOT_AT_WORKER_START = (
    "workergen_runtime.scaffold",
    "workergen_runtime.scheduling.expressions",
    "workergen_runtime.ops.doctor",
    "workergen_runtime.cli.dlq",
    "workergen_runtime.ops.monitor",
    "workergen_runtime.cli.schedule",
    "workergen_runtime.scheduling.scheduler",
    "workergen_runtime.cli.http",
    "rich",
    "typer.rich_utils",
)


def imported_by_queue_work(project: Path, modules: tuple[str, ...]) -> list[str]:
    """Which of modules `python -m <package> queue work` imported when it starts Celery's worker
    (replaced here by a stand-in that reports them)."""
    code = (
        "import json, runpy, sys\n"
        f"import {PACKAGE}\n"
        "from workergen_runtime.worker import start as worker\n"
        "def report(app, argv):\n"
        f"    print('imported:', json.dumps([m for m in {modules!r} if m in sys.modules]))\n"
        "    return 0\n"
        "worker.run_worker = report\n"
        f"sys.argv = ['{PACKAGE}', 'queue', 'work', '--queue', 'default']\n"
        f"runpy.run_module('{PACKAGE}', run_name='__main__', alter_sys=True)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=project,
        env={**os.environ, "BROKER_URL": "memory://"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    lines = [line for line in done.stdout.splitlines() if line.startswith("imported: ")]
    assert lines, done.stdout + done.stderr
    return json.loads(lines[-1].removeprefix("imported: "))


def python_in(project: Path, code: str, **env: str) -> subprocess.CompletedProcess[str]:
    """Run Python code in the project's folder, with these environment variables."""
    return subprocess.run(
        [sys.executable, "-c", code],
        cwd=project,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


def help_of(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", PACKAGE, *args, "--help"],
        cwd=project,
        env={**os.environ, "COLUMNS": "120"},
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_queue_work_imports_no_other_command(render):
    project = render(broker="redis", http_api=True)
    assert imported_by_queue_work(project, NOT_AT_WORKER_START) == []


def test_help_lists_every_command_with_its_help_in_order(render):
    project = render(broker="redis", http_api=True)
    done = help_of(project)
    assert done.returncode == 0, done.stderr
    rows = [line.split()[1] for line in done.stdout.splitlines() if line.startswith("│ ")]
    shown = [row for row in rows if not row.startswith("-")]
    assert shown == [
        "make:job",
        "make:cron",
        "doctor",
        "monitor",
        "queue",
        "dlq",
        "schedule",
        "http",
    ]
    assert "Audit the live settings" in done.stdout
    assert "Dead letters: jobs that failed for good" in done.stdout


def test_each_command_loaded_on_use_shows_its_own_help(render):
    project = render(broker="redis", http_api=True)
    for command, words in [
        (["doctor"], "--json"),
        (["dlq", "list"], "Usage: python -m billing dlq list"),
        (["make:job"], "--retry-for"),
        (["schedule"], "Run the scheduler"),
    ]:
        done = help_of(project, *command)
        assert done.returncode == 0, done.stderr
        assert words in done.stdout, done.stdout


def test_an_unknown_command_is_a_usage_error_with_a_suggestion(render):
    project = render(broker="redis")
    done = subprocess.run(
        [sys.executable, "-m", PACKAGE, "doctr"],
        cwd=project,
        env={**os.environ, "COLUMNS": "120"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert "No such command 'doctr'" in done.stderr
    assert "Did you mean 'doctor'?" in done.stderr


def test_what_the_worker_loaded_is_frozen_before_the_pool_forks(render):
    # Celery sends celeryd_after_setup just before the pool starts its processes: from then
    # on the cycle collector leaves the loaded objects alone, in the pool processes too, so
    # their pages stay shared with the main process.
    code = (
        "import gc\n"
        "from celery import signals\n"
        f"import {PACKAGE}\n"
        "from workergen_runtime.celery_app import app\n"
        "before = gc.get_freeze_count()\n"
        "signals.celeryd_after_setup.send(sender='worker@host', instance=None, conf=app.conf)\n"
        "print(before, gc.get_freeze_count())\n"
    )
    done = python_in(render(broker="redis"), code)
    assert done.returncode == 0, done.stderr
    before, after = map(int, done.stdout.split())
    assert before == 0
    assert after > 10_000


def test_the_worker_starts_without_the_celery_command_group(render):
    # `celery.bin.celery` imports every `celery` command and the plugins installed for them
    # (Flower: Tornado, prometheus_client): a tenth of a second before the worker starts.
    code = (
        "import sys\n"
        f"import {PACKAGE}\n"
        "from workergen_runtime.celery_app import app\n"
        "from workergen_runtime.worker.start import run_worker\n"
        "app.user_options['worker'].add(__import__('click').Option(['--extra-flag'], "
        "is_flag=True))\n"
        "code = run_worker(app, ['worker', '--help'])\n"
        "print(code, [m for m in ('celery.bin.celery', 'flower') if m in sys.modules])\n"
    )
    done = python_in(render(broker="redis"), code, BROKER_URL="memory://", COLUMNS="120")
    assert done.returncode == 0, done.stderr
    assert "Usage: celery worker" in done.stdout
    assert "--without-mingle" in done.stdout
    assert "--extra-flag" in done.stdout  # the app's own worker options, as `celery` adds them
    assert done.stdout.splitlines()[-1] == "0 []"


def test_a_worker_command_line_must_start_with_worker(render):
    code = (
        f"import {PACKAGE}\n"
        "from workergen_runtime.celery_app import app\n"
        "from workergen_runtime.worker.start import run_worker\n"
        "run_worker(app, ['beat'])\n"
    )
    done = python_in(render(broker="redis"), code, BROKER_URL="memory://")
    assert done.returncode == 1
    assert "not a worker command line" in done.stderr
