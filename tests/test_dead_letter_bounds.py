"""Dead letters under stress: a store that fails, corrupt records, a 50 MB error or argument."""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from support.brokers import RABBITMQ_URL, REDIS_URL, require_broker
from support.faults import dead_letters, rabbitmq_lock, wait_for, wait_for_dead_letters
from support.hostile import Hostile, put_on_redis
from support.projects import Project, unique_namespace

pytestmark = [pytest.mark.broker, pytest.mark.e2e]

PACKAGE = "billing"
BIG = 50 * 1024 * 1024

BIG_JOB = '''"""A job that fails with a large error; given a large argument, it shows it too."""

from workergen_runtime import job


@job(name="{package}.big_fail")
def big_fail(blob: str, size: int = 0) -> None:
    raise ValueError("\\x1b[2J cannot take " + blob + "x" * size)
'''


@pytest.fixture
def project(request, render, tmp_path: Path) -> Iterator[Project]:
    """A project on Redis, or on the broker a test names (indirect parametrization)."""
    broker = getattr(request, "param", "redis")
    redis_url = require_broker("redis", REDIS_URL)
    ns = unique_namespace("db")
    env = {"QUEUE_NAMESPACE": ns, "LOCK_URL": redis_url, "BROKER_URL": redis_url}
    answers = {"broker": broker, "result_backend": "none", "queue_namespace": "billing"}
    if broker == "rabbitmq":
        answers["rabbitmq_queue_type"] = "classic"
        env["BROKER_URL"] = require_broker("rabbitmq", RABBITMQ_URL)
    proj = Project.copy_of(render(**answers), tmp_path / "billing", PACKAGE, **env)
    proj.broker = broker
    (proj.root / PACKAGE / "jobs" / "big.py").write_text(BIG_JOB.format(package=PACKAGE))
    lock = rabbitmq_lock(exclusive=False) if broker == "rabbitmq" else None
    with lock or contextlib.nullcontext():
        try:
            yield proj
        finally:
            proj.run("dlq", "purge", "--yes")
            client = redis.Redis.from_url(redis_url)
            keys = list(client.scan_iter(match=f"{ns}*"))
            keys += list(client.scan_iter(match=f"_kombu.binding.{ns}*"))
            if keys:
                client.delete(*keys)
            client.close()


def broker_redis(project: Project) -> redis.Redis:
    return redis.Redis.from_url(project.env["BROKER_URL"])


def cpu_seconds(pid: int) -> float:
    """User and system CPU time of a process and its children that ended (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return sum(int(value) for value in fields[11:15]) / os.sysconf("SC_CLK_TCK")


def malformed(token: str) -> Hostile:
    headers = {"task": f"{PACKAGE}.big_fail", "id": f"bad-{token}", "retries": "x"}
    return Hostile(token, "retries x", headers, json.dumps([[token], {}, {}]).encode())


def test_a_store_that_fails_is_retried_with_backoff_never_in_a_hot_loop(
    project: Project,
) -> None:
    client = broker_redis(project)
    ns = project.env["QUEUE_NAMESPACE"]
    # The lane's dead-letter hash is a string: every record fails (WRONGTYPE).
    client.set(f"{ns}.default.dlq", "not a hash")
    put_on_redis(project.env["BROKER_URL"], f"{ns}.default", [malformed("stuck")])
    with project.worker("--concurrency", "1") as worker:
        assert worker.process is not None
        wait_for(lambda: "Could not record dead letter" in worker.log(), 30, "a failed record")
        lines, cpu = len(worker.log().splitlines()), cpu_seconds(worker.process.pid)
        time.sleep(10)
        lines = len(worker.log().splitlines()) - lines
        cpu = cpu_seconds(worker.process.pid) - cpu
        client.delete(f"{ns}.default.dlq")
        letters = wait_for_dead_letters(project, 1, 30, worker)
        assert worker.process.poll() is None
    print(f"\n[redis] failing store: {lines} log lines and {cpu:.2f} s CPU in 10 s")
    assert lines < 60, worker.log()[-3000:]
    assert cpu < 3.0
    assert [(x["id"], x["reason"]) for x in letters] == [("bad-stuck", "malformed")]


def test_corrupt_and_tampered_records_are_listed_as_corrupt(project: Project) -> None:
    client = broker_redis(project)
    ns = project.env["QUEUE_NAMESPACE"]
    sound = {"id": "tampered", "task_name": "x", "task_id": "x", "args": [], "kwargs": {}}
    client.hset(f"{ns}.default.dlq", "broken", "{not json")
    client.hset(f"{ns}.default.dlq", "tampered", json.dumps({**sound, "lane": "../other"}))
    client.hset(f"{ns}.batch.dlq", "bad-args", json.dumps({**sound, "args": "rm -rf /"}))
    # A corrupt record under the id of a new dead letter does not stop it being kept.
    client.hset(f"{ns}.default.dlq", "bad-replaced", "\x00corrupt")
    put_on_redis(project.env["BROKER_URL"], f"{ns}.default", [malformed("replaced")])
    with project.worker("--concurrency", "1"):
        wait_for(
            lambda: any(x["reason"] == "malformed" for x in dead_letters(project)),
            30,
            "the dead letter that replaces a corrupt record",
        )
    listed = project.run("dlq", "list")
    assert listed.returncode == 0 and "Traceback" not in listed.stderr, listed.stderr
    reasons = {line.split()[0]: line.split()[3] for line in listed.stdout.splitlines()}
    assert reasons == {
        "broken": "corrupt",
        "tampered": "corrupt",
        "bad-args": "corrupt",
        "bad-replaced": "malformed",
    }
    shown = project.run("dlq", "show", "tampered")
    assert shown.returncode == 0 and "lane '../other'" in shown.stdout, shown.stderr
    refused = project.run("dlq", "replay", "bad-args")
    assert refused.returncode == 1 and "cannot be replayed" in refused.stderr


@pytest.mark.parametrize("project", ["redis", "rabbitmq"], indirect=True)
def test_a_50_mb_error_leaves_a_bounded_record_and_log(project: Project) -> None:
    letter, log = dead_letter_of(project, f"'y', {BIG}")
    # The failure details were kept (RabbitMQ: not lost to a publish that timed out).
    assert letter["reason"] == "failed" and letter["exception"].startswith("ValueError")
    assert letter["truncated"]["exception"] > BIG
    assert letter["args"] == ["y", BIG]
    assert_bounded(project, letter, log)


@pytest.mark.parametrize("project", ["redis", "rabbitmq"], indirect=True)
def test_a_50_mb_argument_is_refused_before_it_runs_with_a_bounded_record(
    project: Project,
) -> None:
    letter, log = dead_letter_of(project, f"'x' * {BIG}")
    # A body over the worker's bound (1 MiB) is never decoded, nor run.
    assert letter["reason"] == "malformed"
    assert "more than the 1048576 allowed" in letter["exception"]
    assert letter["truncated"]["body"] > BIG and letter["args"] is None
    assert_bounded(project, letter, log)


def dead_letter_of(project: Project, arguments: str) -> tuple[dict, str]:
    """Dispatch big_fail(<arguments>) to a worker; its one dead letter and the worker's log."""
    with project.worker("--concurrency", "1") as worker:
        code = f"from {PACKAGE}.jobs.big import big_fail\nprint(big_fail.dispatch({arguments}).id)"
        sent = project.python(code, timeout=120)
        assert sent.returncode == 0, sent.stderr
        task_id = sent.stdout.split()[-1]
        [letter] = wait_for_dead_letters(project, 1, 120, worker)
        log = worker.log()
    assert letter["id"] == task_id
    return letter, log


def assert_bounded(project: Project, letter: dict, log: str) -> None:
    """The record, the log and `dlq show` stay small and print no control character."""
    assert len(json.dumps(letter)) < 1024 * 1024
    assert max(len(line) for line in log.splitlines()) < 200 * 1024
    assert "\x1b" not in log
    shown = project.run("dlq", "show", letter["id"])
    assert shown.returncode == 0 and "truncated:" in shown.stdout
    assert "\x1b" not in shown.stdout
    if project.broker == "redis":
        client = redis.Redis.from_url(project.env["BROKER_URL"])
        ns = project.env["QUEUE_NAMESPACE"]
        assert client.hstrlen(f"{ns}.default.dlq", letter["id"]) < 1024 * 1024
