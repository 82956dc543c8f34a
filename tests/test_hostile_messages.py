"""Hostile messages on every broker's lanes: the worker dead-letters them and keeps running.

A seeded, bounded fuzz: bad task messages (wrong header types, missing id or
task, bodies that are not JSON or of the wrong shape, refused content, huge
headers, envelopes the transport cannot read) mixed with healthy jobs. The
worker must never exit or restart its consumer, run every healthy job once,
and keep every bad message as a dead letter with its reason.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from support.faults import (
    add_fault_jobs,
    dead_letters,
    dispatch,
    runs,
    wait_for,
    wait_for_dead_letters,
)
from support.hostile import Hostile, found_in, hostile_messages, table_kinds
from support.lanes import lane_project, put, remove_namespace
from support.projects import Project, redis_project, unique_namespace

pytestmark = [pytest.mark.broker, pytest.mark.e2e]

PACKAGE = "billing"
SEED = 9
# Every entry of the table (93) and a seeded mix of other faults.
BAD_PER_BROKER = 120
ROUNDS = 4
HEALTHY_PER_ROUND = 5
LANES = ("default", "batch")
# Terminal control characters other than the line feed.
CONTROL = re.compile(r"[\x00-\x09\x0b-\x1f\x7f-\x9f]")


@pytest.fixture(params=["redis", "rabbitmq-classic", "rabbitmq-quorum", "sqs"])
def broker(request) -> str:
    return request.param


@pytest.fixture
def project(broker: str, render, tmp_path: Path, request) -> Iterator[Project]:
    with lane_project(broker, render, tmp_path, request, "hm") as proj:
        yield proj


def queue_depths(project: Project, broker: str) -> dict[str, tuple[int, int]]:
    """RabbitMQ: (ready, consumers) of the lanes and dead-letter queues, to explain a failure."""
    if not broker.startswith("rabbitmq"):
        return {}
    from kombu import Connection

    ns = project.env["QUEUE_NAMESPACE"]
    depths = {}
    with Connection(project.env["BROKER_URL"]) as connection:
        channel = connection.channel()
        for name in [f"{ns}.{lane}{suffix}" for lane in LANES for suffix in ("", ".dlq")]:
            _, ready, consumers = channel.queue_declare(name, passive=True)
            depths[name.removeprefix(ns)] = (ready, consumers)
    return depths


def bad_messages(broker: str) -> list[Hostile]:
    """The seeded mix, without what cannot be a fault on that broker."""
    drawn = hostile_messages(SEED, BAD_PER_BROKER * 2, f"{PACKAGE}.slow")
    if broker.startswith("rabbitmq"):
        drawn = [message for message in drawn if message.amqp_ready]
    elif broker == "sqs":
        drawn = [message for message in drawn if message.sqs_ready]
    return drawn[:BAD_PER_BROKER]


def test_hostile_messages_are_dead_lettered_while_healthy_jobs_run_once(
    project: Project, broker: str, folder: Path
) -> None:
    bad = bad_messages(broker)
    assert len(bad) == BAD_PER_BROKER
    # The end-to-end net holds every entry of the table the projects test in process.
    sendable = [m for m in hostile_messages(SEED, 200, "t") if m.kind in table_kinds()]
    missing = table_kinds() - {m.kind for m in bad}
    assert missing <= {m.kind for m in sendable if not m.sqs_ready}, missing
    healthy: list[str] = []
    chunk = len(bad) // ROUNDS + 1
    with project.worker("--concurrency", "2") as worker:
        for number in range(ROUNDS):
            lane = LANES[number % 2]
            put(project, broker, lane, bad[number * chunk : (number + 1) * chunk])
            tokens = [f"healthy-{number}-{i}" for i in range(HEALTHY_PER_ROUND)]
            dispatch(project, "slow", *[[str(folder), token, 0] for token in tokens], lane=lane)
            healthy += tokens
        wait_for(
            lambda: all(runs(folder, token, "done") for token in healthy),
            90,
            f"the healthy jobs\n{worker.log()[-3000:]}",
        )
        try:
            letters = wait_for_dead_letters(project, len(bad), 90, worker)
        except AssertionError as exc:
            seen = dead_letters(project)
            missing = [m for m in bad if not any(found_in(x, m.token) for x in seen)]
            about = [
                line for line in worker.log().splitlines() if any(m.token in line for m in missing)
            ]
            raise AssertionError(
                f"not dead-lettered: {[(m.kind, m.token) for m in missing]}\n"
                + "\n".join(about)[-5000:]
                + f"\n{len(seen)} listed; queues: {queue_depths(project, broker)}\n{exc}"
            ) from None
        assert worker.process is not None and worker.process.poll() is None, worker.log()[-4000:]
        log = worker.log()
    assert "Unrecoverable error" not in log
    assert "Traceback" not in log, log[log.index("Traceback") - 2000 :][:6000]
    # One connection for the whole run: the consumer never restarted.
    assert log.count("Connected to ") == 1, log[-4000:]
    assert [runs(folder, token, "done") for token in healthy] == [1] * len(healthy)

    assert len(letters) == len(bad)
    for message in bad:
        matches = [letter for letter in letters if found_in(letter, message.token)]
        assert len(matches) == 1, (message.kind, message.token, len(matches))
        assert matches[0]["reason"] == message.reason, (message.kind, matches[0]["exception"])
        assert matches[0]["lane"] in LANES

    # The two that once stopped every worker are readable one by one.
    for kind in ("header task=['a']", f"body {b'[' * 30!r} (10000 bytes)"):
        [message] = [m for m in bad if m.kind == kind]
        [letter] = [x for x in letters if found_in(x, message.token)]
        shown = project.run("dlq", "show", letter["id"])
        assert shown.returncode == 0, (kind, shown.stderr[-2000:])
        assert "malformed" in shown.stdout, shown.stdout[:2000]

    listed = project.run("dlq", "list")
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    assert len(lines) == len(bad)
    assert not CONTROL.search(listed.stdout)
    assert max(len(line) for line in lines) < 400


def test_an_unrecoverable_error_in_the_worker_exits_non_zero(
    render, redis_url: str, tmp_path: Path
) -> None:
    proj = redis_project(render, redis_url, tmp_path, "hm")
    # A consumer that cannot start: Celery logs "Unrecoverable error" and stops.
    code = (
        "import sys\n"
        f"import {PACKAGE}\n"
        "from workergen_runtime.worker import consumer\n"
        "def broken(self, *args, **kwargs):\n"
        "    raise RuntimeError('the consumer cannot start')\n"
        "consumer.DeadLetterConsumer.create_task_handler = broken\n"
        f"import {PACKAGE}\n"
        "from workergen_runtime.cli.main import main\n"
        "sys.argv = ['billing', 'queue', 'work', '--pool', 'solo']\n"
        "main()\n"
    )
    done = proj.python(code, timeout=60)
    assert "Unrecoverable error" in done.stderr, done.stderr[-3000:]
    assert done.returncode != 0


@pytest.fixture
def old_and_new(render, redis_url: str, tmp_path: Path) -> Iterator[tuple[Project, Project]]:
    """Two deployments of one project on one namespace: the new one has more jobs."""
    rendered = render(broker="redis", result_backend="none", queue_namespace="billing")
    env = {"BROKER_URL": redis_url, "QUEUE_NAMESPACE": unique_namespace("hm")}
    old = Project.copy_of(rendered, tmp_path / "old", PACKAGE, **env)
    new = Project.copy_of(rendered, tmp_path / "new", PACKAGE, **env)
    add_fault_jobs(new)
    yield old, new
    remove_namespace(old, "redis", env["QUEUE_NAMESPACE"])


def test_a_new_job_reaching_an_old_worker_waits_for_a_worker_that_has_it(
    old_and_new: tuple[Project, Project], folder: Path
) -> None:
    old, new = old_and_new
    with old.worker("--concurrency", "1", name="old", UNKNOWN_TASK_GRACE="120") as stale:
        dispatch(new, "slow", [str(folder), "fresh", 0])
        wait_for(lambda: "Unknown job" in stale.log(), 30, "the old worker to hold it back")
        with new.worker("--concurrency", "1", name="new"):
            wait_for(lambda: runs(folder, "fresh", "done"), 90, "the new worker to run it")
        log = stale.log()
    assert runs(folder, "fresh", "done") == 1
    assert dead_letters(old) == []
    assert "Dead-lettered" not in log


def test_a_job_no_worker_has_is_dead_lettered_after_the_grace(
    old_and_new: tuple[Project, Project], folder: Path
) -> None:
    old, new = old_and_new
    with old.worker("--concurrency", "1", name="old", UNKNOWN_TASK_GRACE="3") as stale:
        [task_id] = dispatch(new, "slow", [str(folder), "fresh", 0])
        letters = wait_for_dead_letters(old, 1, 30, stale)
        assert "back on its lane" in stale.log()
    assert [(x["id"], x["reason"]) for x in letters] == [(task_id, "unknown-task")]
    assert "UNKNOWN_TASK_GRACE=3" in letters[0]["exception"]
    old.run("dlq", "purge", "--yes")


def test_a_message_cannot_raise_its_time_limit(render, redis_url: str, tmp_path: Path) -> None:
    rendered = render(broker="redis", result_backend="none", queue_namespace="billing")
    ns = unique_namespace("hm")
    proj = Project.copy_of(
        rendered,
        tmp_path / "billing",
        PACKAGE,
        BROKER_URL=redis_url,
        QUEUE_NAMESPACE=ns,
    )
    add_fault_jobs(proj)
    folder = tmp_path / "done"
    folder.mkdir()
    try:
        with proj.worker("--concurrency", "1") as worker:
            # `overruns` has limits of 1 s and 2 s and outlives its soft one by 30 s.
            # Its producer asks for more: timelimit [1000, 900] in the headers.
            sent = proj.python(
                f"from {PACKAGE}.jobs.faults import overruns\n"
                f"r = overruns.apply_async(({str(folder)!r}, 'greedy'), time_limit=1000,"
                " soft_time_limit=900)\n"
                "print(r.id)\n"
            )
            assert sent.returncode == 0, sent.stderr
            started = time.monotonic()
            letters = wait_for_dead_letters(proj, 1, 30, worker)
            elapsed = time.monotonic() - started
        assert [x["reason"] for x in letters] == ["time-limit"]
        assert letters[0]["headers"]["timelimit"] == [1000, 900]
        assert elapsed < 15 and runs(folder, "greedy", "attempt") == 1
    finally:
        remove_namespace(proj, "redis", ns)
