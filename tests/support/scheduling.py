"""`schedule work` processes and crons that leave a trace, for the scheduling tests."""

from __future__ import annotations

import contextlib
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import yaml

from support.faults import rabbitmq_lock
from support.projects import Project, unique_namespace

PACKAGE = "billing"
COPIER_YML = Path(__file__).resolve().parents[2] / "copier.yml"
BROKER_FIXTURES = {"redis": "redis_url", "rabbitmq": "rabbitmq_url"}
# Every broker copier.yml offers that runs on this machine (SQS has its own suite).
BROKERS = [
    choice
    for choice in yaml.safe_load(COPIER_YML.read_text())["broker"]["choices"].values()
    if choice in BROKER_FIXTURES
]

# Replaces the body of a generated cron/job: append one line per run to $TRACE_FILE.
TRACE_BODY = """    def handle(self, *args: object) -> None:
        import os
        import time

        with open(os.environ["TRACE_FILE"], "a") as trace:
            trace.write(f"start {time.time()} {os.getpid()} {args}\\n")
        time.sleep(float(os.environ.get("TRACE_SLEEP", "0")))
"""


@contextlib.contextmanager
def broker_project(
    request: pytest.FixtureRequest, render: Callable[..., Path], redis_url: str, tmp_path: Path
) -> Iterator[Project]:
    """A project on the broker `request.param`, its locks in the local Redis."""
    broker = request.param
    broker_url = request.getfixturevalue(BROKER_FIXTURES[broker])
    rendered = render(broker=broker, result_backend="none", queue_namespace="billing")
    proj = Project.copy_of(
        rendered,
        tmp_path / "billing",
        PACKAGE,
        BROKER_URL=broker_url,
        LOCK_URL=redis_url,
        QUEUE_NAMESPACE=unique_namespace("s"),
        TRACE_FILE=str(tmp_path / "trace.log"),
    )
    # The RabbitMQ restart test holds this lock alone while the broker is down.
    with rabbitmq_lock(exclusive=False) if broker == "rabbitmq" else contextlib.nullcontext():
        yield proj


def make(project: Project, *args: str) -> None:
    """Run a make: command of the project, which must succeed."""
    done = project.run(*args)
    assert done.returncode == 0, done.stdout + done.stderr


def give_body(path: Path, body: str) -> None:
    """Replace the `handle` a make:job / make:cron module was written with."""
    source = path.read_text()
    head, _, _ = source.partition("    def handle(self)")
    path.write_text(head + body)


def make_traced(path: Path) -> None:
    """Give a module written by make:job / make:cron a body that records each run."""
    give_body(path, TRACE_BODY)


def runs(trace: Path) -> list[float]:
    """Start times of the recorded runs."""
    if not trace.exists():
        return []
    return [float(line.split()[1]) for line in trace.read_text().splitlines() if line]


def wait_until(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.3)
    raise AssertionError(f"{what} did not happen within {timeout} s")


class SchedulerProcess:
    """`python -m <pkg> schedule work` started with --pidfile and stopped by its PID."""

    def __init__(self, project: Project, name: str = "scheduler", **env: str) -> None:
        self.project = project
        tag = f"{name}-{uuid.uuid4().hex[:8]}"
        self.pidfile = project.root / f"{tag}.pid"
        self.logfile = project.root / f"{tag}.log"
        self.env = env
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> SchedulerProcess:
        with self.logfile.open("wb") as log:
            self.process = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    self.project.package,
                    "schedule",
                    "work",
                    "--pidfile",
                    str(self.pidfile),
                ],
                cwd=self.project.root,
                env={**self.project.env, **self.env},
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        wait_until(lambda: "scheduler:" in self.log() or self.exited(), 60, "scheduler start")
        assert not self.exited(), self.log()
        return self

    def exited(self) -> bool:
        return self.process is not None and self.process.poll() is not None

    def log(self) -> str:
        return self.logfile.read_text(errors="replace") if self.logfile.exists() else ""

    def kill(self) -> None:
        """Die without cleaning up, as a crashed machine would."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(10)

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(20)
        except subprocess.TimeoutExpired:
            self.kill()

    def __enter__(self) -> SchedulerProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
