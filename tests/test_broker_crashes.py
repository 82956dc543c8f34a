"""A broker killed with kill -9 mid-jobs and restarted: no job is lost, the worker recovers.

Each test starts a broker of its own with its persistence on (Redis with an
append-only file synced on every write, RabbitMQ with durable queues) and kills
only that one. They run under CI=true or with WORKERGEN_TEST_BROKER_RESTARTS=1.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import redis

from support.brokers import REDIS_URL
from support.faults import add_fault_jobs, dispatch, runs, wait_for
from support.private_brokers import private_broker
from support.projects import Project, unique_namespace

pytestmark = [pytest.mark.broker, pytest.mark.e2e, pytest.mark.broker_restarts]

PACKAGE = "billing"
JOBS = 10
JOB_SECONDS = 4.0
DOWN_SECONDS = 6
ROUNDS = 3


def lane_length(url: str, project: Project) -> int:
    """Messages still waiting on the default lane's Redis list."""
    return redis.Redis.from_url(url).llen(f"{project.env['QUEUE_NAMESPACE']}.default")


@pytest.mark.parametrize(
    ("broker", "result_backend"),
    [("redis", "none"), ("redis", "redis"), ("rabbitmq", "none")],
    ids=["redis", "redis-with-results", "rabbitmq"],
)
def test_a_broker_killed_mid_jobs_and_restarted_loses_no_job(
    render, tmp_path: Path, folder: Path, broker: str, result_backend: str
) -> None:
    answers = {"broker": broker, "result_backend": result_backend, "queue_namespace": "billing"}
    if broker == "rabbitmq":
        answers["rabbitmq_queue_type"] = "classic"
    with private_broker(broker, tmp_path / "broker") as server:
        env = {"BROKER_URL": server.url, "QUEUE_NAMESPACE": unique_namespace("k")}
        # The result backend lives on the same Redis that is killed; locks on the suite's.
        env["LOCK_URL"] = REDIS_URL
        if result_backend == "redis":
            env["RESULT_BACKEND_URL"] = server.url
        project = Project.copy_of(render(**answers), tmp_path / "billing", PACKAGE, **env)
        add_fault_jobs(project)
        with project.worker("--concurrency", "4", "--queue", "default") as worker:
            for round_ in range(ROUNDS):
                tokens = [f"r{round_}-{n}" for n in range(JOBS)]
                dispatch(project, "slow", *[[str(folder), token, JOB_SECONDS] for token in tokens])
                wait_for(
                    lambda tokens=tokens: any((folder / f"{t}.started").exists() for t in tokens),
                    60,
                    "the first jobs to start",
                )
                if broker == "redis":
                    # Killed once every job was delivered: a message Redis hands out in the
                    # instant it dies is lost in kombu's transport (docs/brokers/redis.md).
                    wait_for(lambda: lane_length(server.url, project) == 0, 30, "deliveries")
                server.kill()
                time.sleep(DOWN_SECONDS)
                server.start()
                wait_for(
                    lambda tokens=tokens: all(runs(folder, t, "done") for t in tokens),
                    180,
                    f"every job of round {round_} to complete:\n{worker.log()[-6000:]}",
                    interval=0.5,
                )
                assert worker.process is not None and worker.process.poll() is None, worker.log()
            log = worker.log()
    # Recovery never crashes the worker (it logs retries of results it could not store yet).
    assert "Unrecoverable error" not in log and "AttributeError" not in log, log[-6000:]
