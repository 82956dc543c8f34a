"""Faults: pool children and whole workers killed with SIGKILL, and a RabbitMQ restart.

Recovery times are printed (run with -s to see them); docs/brokers/*.md record them.
The only timed assertion is the requirement itself: on Redis a dead worker's jobs
are back well before kombu's default restore delay.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from support.brokers import IN_CI, RABBITMQ_URL, REDIS_URL, require_broker, require_broker_restarts
from support.faults import add_fault_jobs, child_pids, dispatch, kill_worker_outright, rabbitmq_lock
from support.faults import runs as runs_of
from support.projects import Project, unique_namespace, wait_for_files

pytestmark = [pytest.mark.broker, pytest.mark.e2e]

PACKAGE = "billing"
# Well under the ~100 s kombu needs by default, with room for a slow machine.
REDIS_RECOVERY_BOUND = 60
LONG = 6.0


@pytest.fixture(params=["redis", "rabbitmq"])
def project(request, render, tmp_path: Path) -> Iterator[Project]:
    redis_url = require_broker("redis", REDIS_URL)
    answers = {"broker": request.param, "result_backend": "none", "queue_namespace": "billing"}
    env = {"LOCK_URL": redis_url, "QUEUE_NAMESPACE": unique_namespace("f")}
    if request.param == "rabbitmq":
        env["BROKER_URL"] = require_broker("rabbitmq", RABBITMQ_URL)
        answers["rabbitmq_queue_type"] = "classic"
    else:
        env["BROKER_URL"] = redis_url
    proj = Project.copy_of(render(**answers), tmp_path / "billing", PACKAGE, **env)
    proj.broker = request.param
    add_fault_jobs(proj)
    if request.param == "rabbitmq":
        with rabbitmq_lock(exclusive=False):
            yield proj
    else:
        yield proj


def wait_for_runs(folder: Path, tokens: list[str], timeout: float) -> float:
    """Wait until every token has at least one `done` run; returns when (monotonic)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if all(runs_of(folder, token, "done") for token in tokens):
            return time.monotonic()
        time.sleep(0.2)
    missing = [t for t in tokens if not runs_of(folder, t, "done")]
    raise AssertionError(f"jobs not completed within {timeout} s: {missing}")


def test_a_pool_child_killed_mid_task_loses_nothing(project: Project, folder: Path) -> None:
    shorts = [f"short-{i}" for i in range(6)]
    with project.worker("--concurrency", "2") as worker:
        dispatch(project, "slow", [str(folder), "victim", LONG])
        dispatch(project, "slow", *[[str(folder), token, 0.2] for token in shorts])
        [started] = wait_for_files(folder, ["victim.started"], timeout=30).values()
        child = int(started)
        assert worker.process is not None
        assert child in child_pids(worker.process.pid), "only our own worker's child is killed"
        os.kill(child, signal.SIGKILL)
        killed_at = time.monotonic()
        done_at = wait_for_runs(folder, ["victim", *shorts], timeout=90)
        assert worker.process.poll() is None
    print(
        f"\n[{project.broker}] pool child SIGKILL: all jobs done {done_at - killed_at:.1f} s later"
    )
    assert runs_of(folder, "victim", "done") == 1
    assert [runs_of(folder, token, "done") for token in shorts] == [1] * len(shorts)


def test_a_worker_killed_outright_loses_nothing_after_a_restart(
    project: Project, folder: Path
) -> None:
    longs = ["long-0", "long-1"]
    shorts = [f"short-{i}" for i in range(6)]
    # Its own process group, as a supervisor starts it: on Redis the restarted worker can
    # tell that the old one is gone and takes its jobs back at once.
    first = project.worker("--concurrency", "2", "--prefetch", "2", name="first", own_group=True)
    first.start()
    try:
        dispatch(project, "slow", *[[str(folder), token, LONG] for token in longs])
        dispatch(project, "slow", *[[str(folder), token, 0.2] for token in shorts])
        wait_for_files(folder, [f"{token}.started" for token in longs], timeout=30)
    finally:
        kill_worker_outright(first)
    killed_at = time.monotonic()
    # The running jobs and the ones it had reserved are unacknowledged: a new
    # worker must get them back.
    with project.worker("--concurrency", "2", name="second"):
        done_at = wait_for_runs(folder, longs + shorts, timeout=120)
    recovery = done_at - killed_at
    print(f"\n[{project.broker}] whole worker SIGKILL + restart: all jobs done in {recovery:.1f} s")
    # Jobs that were not running when the worker died run exactly once.
    assert [runs_of(folder, token, "done") for token in shorts] == [1] * len(shorts)
    assert all(runs_of(folder, token, "done") >= 1 for token in longs)
    if project.broker == "redis":
        assert recovery < REDIS_RECOVERY_BOUND


def rabbitmqctl(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["rabbitmqctl", *args], capture_output=True, text=True, timeout=timeout, check=False
    )


@pytest.mark.broker_restarts
def test_rabbitmq_restarted_with_jobs_queued_keeps_them_and_the_worker_reconnects(
    render, tmp_path: Path, folder: Path
) -> None:
    require_broker_restarts()  # it restarts the shared RabbitMQ
    url = require_broker("rabbitmq", RABBITMQ_URL)
    can_restart = shutil.which("rabbitmqctl") and rabbitmqctl("status", timeout=30).returncode == 0
    if not can_restart:
        reason = "rabbitmqctl cannot control the local RabbitMQ, so the test cannot restart it"
        if IN_CI:
            pytest.fail(f"CI=true: {reason}", pytrace=False)
        pytest.skip(reason)
    rendered = render(
        broker="rabbitmq",
        rabbitmq_queue_type="classic",
        result_backend="none",
        queue_namespace="billing",
    )
    proj = Project.copy_of(
        rendered, tmp_path / "billing", PACKAGE, BROKER_URL=url, QUEUE_NAMESPACE=unique_namespace()
    )
    add_fault_jobs(proj)
    queued = [f"queued-{i}" for i in range(6)]
    with rabbitmq_lock(exclusive=True), proj.worker("--concurrency", "1") as worker:
        dispatch(proj, "slow", [str(folder), "running", 3.0])
        dispatch(proj, "slow", *[[str(folder), token, 0.1] for token in queued])
        wait_for_files(folder, ["running.started"], timeout=30)
        stopped = rabbitmqctl("stop_app")
        assert stopped.returncode == 0, stopped.stderr
        try:
            time.sleep(2)
        finally:
            started = rabbitmqctl("start_app")
            assert started.returncode == 0, started.stderr
            assert rabbitmqctl("await_startup").returncode == 0
        back_at = time.monotonic()
        done_at = wait_for_runs(folder, ["running", *queued], timeout=120)
        assert worker.process is not None and worker.process.poll() is None
        assert "ready." in worker.log()
    print(f"\n[rabbitmq] restart: all jobs done {done_at - back_at:.1f} s after RabbitMQ was back")
    assert [runs_of(folder, token, "done") for token in queued] == [1] * len(queued)
