"""Redis: the jobs a worker held when it was SIGKILLed whole come back, and run.

- Restarted on the same host, the worker takes them back before it is ready, while its
  old heartbeat (WORKER_HEARTBEAT_TTL, a minute here) is still alive.
- A worker of another host (its own UTS namespace, so its own hostname) that never comes
  back: a worker of this host cannot check its processes, and gives its jobs back once
  its heartbeat expired (a few seconds here).
- A live worker's jobs are never taken, not even by a second worker started on the same
  host under the same node name.

Either way nothing is lost, and the jobs that were not running when the worker died run
exactly once. The figures are printed (run with -s); bench/recovery.py measures them
against stock Celery.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from support.brokers import IN_CI
from support.faults import add_fault_jobs, dispatch, kill_worker_group, wait_for
from support.faults import runs as runs_of
from support.projects import Project, Worker, redis_project

pytestmark = [pytest.mark.broker, pytest.mark.e2e]

PACKAGE = "billing"
LONG = 3.0  # the jobs running when the worker dies
SHORT = 0.05
# Two processes reserving four messages each: two jobs run, six wait reserved.
WORKER_ARGS = ("--concurrency", "2", "--prefetch", "4")
TAKEN_BACK = re.compile(r"Restored (\d+) message\(s\) of worker \S+: its process on this host")
EXPIRED = re.compile(r"Restored (\d+) message\(s\) of worker \S+: its heartbeat expired")


@pytest.fixture
def project(render, redis_url: str, tmp_path: Path) -> Project:
    proj = redis_project(render, redis_url, tmp_path, "rr", LOCK_URL=redis_url)
    add_fault_jobs(proj)
    return proj


def crash_with_jobs_held(project: Project, folder: Path, first: Worker, shorts: int) -> list[str]:
    """Start `first`, give it work, SIGKILL its process group; returns every job's token."""
    tokens = ["long-0", "long-1", *(f"short-{i}" for i in range(shorts))]
    first.start()
    try:
        calls = [
            [str(folder), token, LONG if token.startswith("long") else SHORT] for token in tokens
        ]
        dispatch(project, "slow", *calls)
        wait_for(
            lambda: runs_of(folder, "long-0", "begun") and runs_of(folder, "long-1", "begun"),
            timeout=30,
            what="the long jobs to start",
        )
    finally:
        kill_worker_group(first)
    return tokens


def begun(folder: Path, tokens: list[str]) -> set[str]:
    return {token for token in tokens if runs_of(folder, token, "begun")}


def all_done(folder: Path, tokens: list[str]) -> bool:
    return all(runs_of(folder, token, "done") for token in tokens)


def check_nothing_lost(folder: Path, tokens: list[str], running: set[str]) -> None:
    """Every job ran to the end; those not running at the crash ran exactly once."""
    assert all(runs_of(folder, token, "done") >= 1 for token in tokens)
    waiting = [token for token in tokens if token not in running]
    assert waiting, "the crash came after every job had started"
    assert {runs_of(folder, t, "begun") for t in waiting} == {1}
    assert {runs_of(folder, t, "done") for t in waiting} == {1}


def reruns_began(folder: Path, tokens: list[str]) -> float:
    """When the last of the jobs that began twice began again (wall clock; 0: none)."""
    again = [sorted(p.stat().st_mtime for p in folder.glob(f"{t}.begun.*")) for t in tokens]
    return max((times[1] for times in again if len(times) > 1), default=0.0)


def test_a_worker_restarted_on_its_host_takes_back_its_jobs_before_it_is_ready(
    project: Project, folder: Path
) -> None:
    env = {"WORKER_HEARTBEAT_TTL": "60"}
    first = project.worker(*WORKER_ARGS, name="first", own_group=True, **env)
    tokens = crash_with_jobs_held(project, folder, first, shorts=40)
    running = begun(folder, tokens)
    second = project.worker(*WORKER_ARGS, name="second", own_group=True, **env)
    with second:
        ready_at = time.time()
        wait_for(lambda: all_done(folder, tokens), timeout=30, what="every job to be done")
        done_at = time.time()
    log = second.log()
    taken = TAKEN_BACK.search(log)
    assert taken, log[-3000:]
    # At start-up: before the worker said it was ready, so not by the (minute-long) heartbeat.
    assert taken.start() < log.index("ready."), log[-3000:]
    assert int(taken.group(1)) >= 2  # at least the two jobs that were running
    assert not EXPIRED.search(log)
    check_nothing_lost(folder, tokens, running)
    back = reruns_began(folder, tokens) - ready_at
    print(
        f"\n[redis] same host restart: {taken.group(1)} held jobs taken back at start-up; "
        f"the cut-short ones running again {max(back, 0):.2f} s after ready, all done "
        f"{done_at - ready_at:.1f} s after ready"
    )


def unshare_uts() -> list[str]:
    """A launcher that runs the worker under another hostname (its own UTS namespace)."""
    hostname = f"elsewhere-{uuid.uuid4().hex[:6]}"
    rename = f'hostname {hostname} && exec "$@"'
    launcher = ["unshare", "--uts", "--map-root-user", "sh", "-c", rename]
    usable = shutil.which("unshare") and (
        subprocess.run(
            [*launcher, "sh", "hostname"], capture_output=True, text=True, check=False
        ).stdout.strip()
        == hostname
    )
    if not usable:
        reason = "unshare cannot give a process another hostname here (no user namespaces)"
        if IN_CI:
            pytest.fail(f"CI=true: {reason}", pytrace=False)
        pytest.skip(reason)
    return [*launcher, "sh"]


def test_jobs_of_a_worker_of_another_host_come_back_once_its_heartbeat_expired(
    project: Project, folder: Path
) -> None:
    ttl = 8  # its heartbeat outlives the start of the second worker: no take-back at start
    env = {"WORKER_HEARTBEAT_TTL": str(ttl)}
    launcher = unshare_uts()
    first = project.worker(*WORKER_ARGS, name="first", launcher=launcher, own_group=True, **env)
    tokens = crash_with_jobs_held(project, folder, first, shorts=12)
    killed_at = time.time()
    running = begun(folder, tokens)
    with project.worker(*WORKER_ARGS, name="second", **env) as second:
        wait_for(lambda: all_done(folder, tokens), timeout=ttl + 30, what="every job to be done")
    log = second.log()
    expired = EXPIRED.search(log)
    assert expired, log[-3000:]
    assert not TAKEN_BACK.search(log)  # its processes cannot be checked from this host
    check_nothing_lost(folder, tokens, running)
    back = reruns_began(folder, tokens) - killed_at
    print(
        f"\n[redis] another host, never back (WORKER_HEARTBEAT_TTL={ttl}): {expired.group(1)} "
        f"held jobs; the cut-short ones running again {back:.1f} s after the crash"
    )


def test_a_second_worker_started_with_the_same_node_name_never_takes_a_live_ones_jobs(
    project: Project, folder: Path
) -> None:
    node = ("--hostname", f"twin-{uuid.uuid4().hex[:6]}@%h")
    tokens = ["long-0", "long-1", *(f"short-{i}" for i in range(6))]
    with project.worker(*WORKER_ARGS, *node, name="first", own_group=True) as first:
        calls = [[str(folder), t, LONG if t.startswith("long") else SHORT] for t in tokens]
        dispatch(project, "slow", *calls)
        wait_for(lambda: len(begun(folder, tokens[:2])) == 2, 30, "the long jobs to start")
        # Started twice by mistake, under the same name, while the first one holds jobs.
        with project.worker(*WORKER_ARGS, *node, name="twin", own_group=True) as twin:
            wait_for(lambda: all_done(folder, tokens), timeout=30, what="every job to be done")
            assert first.process is not None and first.process.poll() is None
    assert "Restored" not in twin.log(), twin.log()[-3000:]
    assert {runs_of(folder, token, "begun") for token in tokens} == {1}
