"""Dead letters on RabbitMQ, classic and quorum lanes: the broker's dead-letter queues."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from support.brokers import require_rabbitmqctl
from support.faults import (
    DEAD_LETTERED,
    add_fault_jobs,
    dead_letters,
    dispatch,
    rabbitmq_lock,
    runs,
    wait_for,
    wait_for_dead_letters,
)
from support.projects import Project, unique_namespace, wait_for_files
from support.rabbitmq import lane_policies, remove_namespace

pytestmark = [pytest.mark.broker, pytest.mark.e2e]

PACKAGE = "billing"
LANES = ("critical", "default", "batch")
MAX_DELIVERIES = 3


@pytest.fixture(params=["classic", "quorum"])
def project(
    request, render, rabbitmq_url: str, redis_url: str, tmp_path: Path
) -> Iterator[Project]:
    rendered = render(
        broker="rabbitmq",
        rabbitmq_queue_type=request.param,
        result_backend="none",
        queue_namespace="billing",
    )
    proj = Project.copy_of(
        rendered,
        tmp_path / "billing",
        PACKAGE,
        BROKER_URL=rabbitmq_url,
        LOCK_URL=redis_url,
        QUEUE_NAMESPACE=unique_namespace("dl"),
        TASK_MAX_DELIVERIES=str(MAX_DELIVERIES),
    )
    proj.add_probe_job()
    add_fault_jobs(proj)
    with rabbitmq_lock(exclusive=False):
        yield proj
    proj.run("dlq", "purge", "--yes")
    remove_namespace(rabbitmq_url, proj.env["QUEUE_NAMESPACE"], LANES)


@pytest.mark.parametrize("project", ["classic"], indirect=True)
def test_a_worker_consumes_before_its_policies_are_checked_then_sets_them(
    project: Project, folder: Path, tmp_path: Path
) -> None:
    real = require_rabbitmqctl("to time the worker's policy check")
    # A rabbitmqctl whose `list_policies` waits for the test: a slow Erlang node.
    go = tmp_path / "go"
    slow = tmp_path / "slow-bin"
    slow.mkdir()
    (slow / "rabbitmqctl").write_text(
        "#!/bin/sh\n"
        'case " $* " in *" list_policies "*)\n'
        f"  i=0; while [ ! -e '{go}' ] && [ $i -lt 1200 ]; do sleep 0.05; i=$((i+1)); done;;\n"
        "esac\n"
        f"exec '{real}' \"$@\"\n"
    )
    (slow / "rabbitmqctl").chmod(0o755)
    ns = project.env["QUEUE_NAMESPACE"]
    path = f"{slow}{os.pathsep}{project.env.get('PATH', os.environ['PATH'])}"
    with project.worker("--queue", "default", PATH=path) as worker:
        project.dispatch_probes(folder, ["before-the-policies"])
        wait_for_files(folder, ["before-the-policies"])
        assert "dead-letter policies are set" not in worker.log()
        assert lane_policies(ns) == []
        go.touch()
        wait_for(lambda: "dead-letter policies are set" in worker.log(), 60, "the policies")
    assert sorted(lane_policies(ns)) == sorted(f"{ns}.{lane}.dead-letters" for lane in LANES)


def test_a_failing_job_reaches_the_dead_letter_queue_after_its_attempts(
    project: Project, folder: Path
) -> None:
    with project.worker("--concurrency", "2") as worker:
        project.dispatch_probes(folder, [f"before-{i}" for i in range(4)])
        [pill] = dispatch(project, "always_fails", [str(folder), "pill"])
        project.dispatch_probes(folder, [f"after-{i}" for i in range(4)])
        wait_for_files(folder, [f"before-{i}" for i in range(4)] + [f"after-{i}" for i in range(4)])
        letters = wait_for_dead_letters(project, 1, 60, worker)
    assert [letter["id"] for letter in letters] == [pill]
    assert runs(folder, "pill", "attempt") == 3
    letter = letters[0]
    assert letter["attempts"] == 3 and letter["reason"] == "failed"
    assert letter["lane"] == "default" and letter["args"] == [str(folder), "pill"]
    assert "upstream is down" in letter["traceback"]


def test_a_job_that_kills_its_worker_is_dead_lettered_after_bounded_deliveries(
    project: Project, folder: Path
) -> None:
    with project.worker("--concurrency", "2") as worker:
        [pill] = dispatch(project, "crashes", [str(folder), "pill"])
        project.dispatch_probes(folder, [f"healthy-{i}" for i in range(6)])
        wait_for_files(folder, [f"healthy-{i}" for i in range(6)])
        letters = wait_for_dead_letters(project, 1, 90, worker)
        assert worker.process is not None and worker.process.poll() is None
    assert runs(folder, "pill", "attempt") == MAX_DELIVERIES
    assert [(x["id"], x["reason"]) for x in letters] == [(pill, "delivery-limit")]


@pytest.mark.parametrize("project", ["classic"], indirect=True)
def test_a_job_gets_its_soft_time_limit_then_is_killed_and_dead_lettered_at_the_hard_one(
    project: Project, folder: Path
) -> None:
    with project.worker("--concurrency", "2") as worker:
        project.dispatch_probes(folder, ["before"])
        wait_for_files(folder, ["before"])  # other jobs' limits are armed and cancelled first
        [overrun] = dispatch(project, "overruns", [str(folder), "slowpoke"])
        letters = wait_for_dead_letters(project, 1, 60, worker)
        project.dispatch_probes(folder, ["after"])
        wait_for_files(folder, ["after"])
        assert worker.process is not None and worker.process.poll() is None
    assert runs(folder, "slowpoke", "soft") == 1  # SoftTimeLimitExceeded, raised in the job
    assert runs(folder, "slowpoke", "attempt") == 1
    assert [(x["id"], x["reason"]) for x in letters] == [(overrun, "time-limit")]
    assert "TimeLimitExceeded(2" in letters[0]["exception"]


def test_pickle_and_unknown_jobs_end_in_the_dead_letter_queue_unrun(
    project: Project, folder: Path
) -> None:
    pickled_id, unknown_id = str(uuid.uuid4()), str(uuid.uuid4())
    with project.worker("--queue", "default", UNKNOWN_TASK_GRACE="0") as worker:
        project.send_raw(
            f"{PACKAGE}.probe", [str(folder), "pickled"], task_id=pickled_id, serializer="pickle"
        )
        project.send_raw(f"{PACKAGE}.no_such_job", [], task_id=unknown_id)
        project.dispatch_probes(folder, ["json-after"])
        wait_for_files(folder, ["json-after"])
        letters = wait_for_dead_letters(project, 2, 30, worker)
    assert len(letters) == 2, letters
    assert not (folder / "pickled").exists()
    by_id = {letter["id"]: letter for letter in letters}
    assert by_id[pickled_id]["reason"] == "refused"
    assert by_id[pickled_id]["content_type"] == "application/x-python-serialize"
    assert by_id[pickled_id]["args"] is None
    assert by_id[unknown_id]["reason"] == "unknown-task"


def test_dlq_list_show_replay_and_purge(project: Project, folder: Path) -> None:
    with project.worker("--concurrency", "2") as worker:
        [first] = dispatch(project, "always_fails", [str(folder), "first"])
        [second] = dispatch(project, "always_fails", [str(folder), "second"], lane="batch")
        letters = wait_for_dead_letters(project, 2, 60, worker)
        assert len(letters) == 2, letters

        listed = project.run("dlq", "list")
        assert listed.returncode == 0
        assert first in listed.stdout and second in listed.stdout
        # Listing hands every message back: nothing is consumed by looking.
        assert len(dead_letters(project)) == 2

        shown = project.run("dlq", "show", second)
        assert shown.returncode == 0
        assert "lane:         batch" in shown.stdout and "ConnectionError" in shown.stdout

        (folder / "fixed").write_text("the bug is fixed")
        replayed = project.run("dlq", "replay", "--all")
        assert replayed.returncode == 0, replayed.stderr
        assert "2 dead letter(s) replayed" in replayed.stdout
        wait_for_files(folder, ["first", "second"])
        assert dead_letters(project) == []

        (folder / "fixed").unlink()
        # The worker's log still counts the first two letters, replayed since.
        logged = worker.log().count(DEAD_LETTERED)
        [third] = dispatch(project, "always_fails", [str(folder), "third"])
        letters = wait_for_dead_letters(project, 1, 60, worker, logged_before=logged)
        assert [x["id"] for x in letters] == [third]
        purged = project.run("dlq", "purge", "--yes", "--lane", "default")
        assert purged.returncode == 0 and "purged 1" in purged.stdout
        assert dead_letters(project) == []
