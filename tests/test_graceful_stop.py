"""SIGTERM as a deploy sends it: running jobs finish, no new one starts, none is lost."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from support.faults import add_fault_jobs, dead_letters, dispatch, runs, wait_for
from support.operations import free_port, lane_depth, ops_project, scrape, value
from support.projects import Project, wait_for_files
from support.scheduling import SchedulerProcess

pytestmark = [pytest.mark.broker, pytest.mark.e2e]

SLOW = 5.0


@pytest.fixture(params=["redis", "rabbitmq"])
def project(request, render, tmp_path: Path) -> Iterator[Project]:
    with ops_project(request.param, request, render, tmp_path) as proj:
        add_fault_jobs(proj)
        yield proj


def terminate_by_pidfile(pidfile: Path) -> None:
    os.kill(int(pidfile.read_text().strip()), signal.SIGTERM)


def test_sigterm_lets_running_jobs_finish_and_hands_the_rest_back(
    project: Project, folder: Path
) -> None:
    running = [[str(folder), f"running-{i}", SLOW] for i in range(2)]
    waiting = [[str(folder), f"waiting-{i}", 0.1] for i in range(6)]
    first = project.worker("--queue", "batch", "--concurrency", "2", name="first").start()
    try:
        dispatch(project, "slow", *running, lane="batch")
        wait_for_files(folder, ["running-0.started", "running-1.started"])
        dispatch(project, "slow", *waiting, lane="batch")
        stopped_at = time.monotonic()
        terminate_by_pidfile(first.pidfile)
        assert first.process is not None
        first.process.wait(SLOW + 30)
        took = time.monotonic() - stopped_at
    finally:
        first.stop()
    # The running jobs were let finish (the stop waited for them), once each...
    assert [runs(folder, f"running-{i}", "done") for i in range(2)] == [1, 1]
    assert took >= 1, f"the worker did not wait for its running jobs ({took:.1f} s)"
    # ...and nothing new started once SIGTERM arrived.
    assert not list(folder.glob("waiting-*")), sorted(p.name for p in folder.iterdir())
    assert first.process.returncode == 0, first.log()[-3000:]

    with project.worker("--queue", "batch", "--concurrency", "2", name="second"):
        wait_for_files(folder, [f"waiting-{i}.started" for i in range(6)])
        wait_for(
            lambda: all(runs(folder, f"waiting-{i}", "done") for i in range(6)),
            60,
            "the handed-back jobs",
        )
        time.sleep(1)
    assert [runs(folder, f"waiting-{i}", "done") for i in range(6)] == [1] * 6
    assert [runs(folder, f"running-{i}", "done") for i in range(2)] == [1, 1]


def test_a_terminated_scheduler_hands_leadership_to_the_standby_at_once(
    project: Project,
) -> None:
    port = free_port()
    leader = SchedulerProcess(project, "leader", METRICS_PORT=str(port)).start()
    try:
        wait_for(lambda: "elected leader" in leader.log(), 30, "the first election")
        leading = wait_for(
            lambda: value(scrape(port), "celery_scheduler_leader") == 1 and scrape(port),
            30,
            "the leader's metrics",
        )
        assert time.time() - value(leading, "celery_scheduler_last_tick_timestamp_seconds") < 10
        standby = SchedulerProcess(project, "standby").start()
        try:
            wait_for(lambda: "standing by" in standby.log(), 30, "the standby")
            stopped_at = time.monotonic()
            terminate_by_pidfile(leader.pidfile)
            wait_for(lambda: "elected leader" in standby.log(), 30, "the standby's election")
            took = time.monotonic() - stopped_at
        finally:
            standby.stop()
    finally:
        leader.stop()
    # The lock lives SCHEDULER_LEADER_TTL (20 s) when its holder dies; released, it is taken at
    # the standby's next tick (every 2 s).
    assert took < 10, f"the standby took {took:.1f} s to lead"


def test_a_job_past_its_time_limit_does_not_hold_the_stop_and_is_dead_lettered(
    project: Project, folder: Path
) -> None:
    worker = project.worker("--queue", "default", "--concurrency", "1", name="overrun").start()
    try:
        [overrun] = dispatch(project, "overruns", [str(folder), "late"])
        wait_for(lambda: runs(folder, "late", "attempt") == 1, 30, "the overrunning job")
        stopped_at = time.monotonic()
        terminate_by_pidfile(worker.pidfile)
        assert worker.process is not None
        worker.process.wait(30)
        took = time.monotonic() - stopped_at
    finally:
        worker.stop()
    # Its hard limit is 2 s: the stop waited for that, not for the 30 s it would sleep.
    assert took < 15, f"the stop took {took:.1f} s"
    # Not lost. Dead-lettered for its time limit; during a warm shutdown the pool may
    # signal the soft limit again, which this job's handler does not catch: then the
    # letter says "failed" with SoftTimeLimitExceeded. Or, when the pool saw its
    # process gone before the limit fired, handed back to its lane as a lost process.
    letters = dead_letters(project)
    if not letters:
        assert lane_depth(project, "default") == 1, worker.log()[-3000:]
        return
    [letter] = letters
    assert letter["id"] == overrun
    assert letter["reason"] == "time-limit" or (
        letter["reason"] == "failed" and "TimeLimitExceeded" in letter["exception"]
    ), letter
