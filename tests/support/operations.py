"""Projects on Redis or RabbitMQ for the operations tests, and the processes they run."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from support.faults import rabbitmq_lock
from support.projects import Project, terminate, unique_namespace

PACKAGE = "billing"
BROKER_FIXTURES = {"redis": "redis_url", "rabbitmq": "rabbitmq_url"}


def free_port() -> int:
    """A TCP port nobody listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextlib.contextmanager
def ops_project(
    broker: str,
    request: pytest.FixtureRequest,
    render: Callable[..., Path],
    tmp_path: Path,
    **env: str,
) -> Iterator[Project]:
    """A copy of the project rendered for `broker`, on its own namespace; cleaned up after."""
    broker_url = request.getfixturevalue(BROKER_FIXTURES[broker])
    redis_url = request.getfixturevalue("redis_url")
    rendered = render(broker=broker, result_backend="none", queue_namespace="billing")
    namespace = unique_namespace("op")
    proj = Project.copy_of(
        rendered,
        tmp_path / "billing",
        PACKAGE,
        BROKER_URL=broker_url,
        LOCK_URL=redis_url,
        QUEUE_NAMESPACE=namespace,
        **env,
    )
    proj.add_probe_job()
    # What the namespace leaves on the broker is deleted at the end of the session
    # (support/cleanup.py).
    lock = rabbitmq_lock(exclusive=False) if broker == "rabbitmq" else contextlib.nullcontext()
    with lock:
        yield proj


def scrape(port: int) -> dict[tuple[str, frozenset], float]:
    """Every sample of /metrics, keyed by name and labels."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as answer:
        text = answer.read().decode()
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def value(samples: dict, metric: str, **labels: str) -> float:
    """The sum of the samples of `metric` whose labels include `labels`."""
    wanted = set(labels.items())
    return sum(v for (n, ls), v in samples.items() if n == metric and wanted <= ls)


def lane_depth(project: Project, lane: str) -> int | None:
    """Messages waiting on a lane's queue, as the project's depth module reads them."""
    code = (
        f"import {project.package}\n"
        "from workergen_runtime.ops.depth import queue_depths\n"
        "from workergen_runtime.settings import get_settings\n"
        "for d in queue_depths(get_settings()):\n"
        f"    if d.lane == {lane!r} and not d.dead_letter:\n"
        "        print(d.messages)\n"
    )
    done = project.python(code)
    assert done.returncode == 0, done.stderr
    value = done.stdout.strip().splitlines()[-1]
    return None if value == "None" else int(value)


class Process:
    """A long-running command of the project (monitor, scheduler), ended by its PID."""

    def __init__(self, project: Project, *args: str, **env: str) -> None:
        self.logfile = project.root / f"{args[0]}-{uuid.uuid4().hex[:8]}.log"
        with self.logfile.open("wb") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", project.package, *args],
                cwd=project.root,
                env={**project.env, **env},
                stdout=log,
                stderr=subprocess.STDOUT,
            )

    def log(self) -> str:
        return self.logfile.read_text(errors="replace")

    def stop(self, timeout: float = 20) -> int | None:
        """SIGTERM by PID; SIGKILL if it does not end in time. Returns the exit code."""
        return terminate(self.process, timeout)

    def __enter__(self) -> Process:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
