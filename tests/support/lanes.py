"""A project on each broker, raw messages put on its lanes, and its queues removed after."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from support.brokers import RABBITMQ_URL, REDIS_URL, require_broker, sqs_client
from support.faults import add_fault_jobs, rabbitmq_lock
from support.hostile import Hostile, put_on_rabbitmq, put_on_redis, put_on_sqs
from support.projects import Project, unique_namespace

PACKAGE = "billing"
LANES = ("critical", "default", "batch")
# Each case runs on one broker: Redis, a RabbitMQ lane type, or SQS (moto).
BROKERS = ["redis", "rabbitmq-classic", "rabbitmq-quorum", "sqs"]


@contextlib.contextmanager
def lane_project(
    broker: str, render, tmp_path: Path, request: pytest.FixtureRequest, prefix: str, **env: str
) -> Iterator[Project]:
    """A project with the fault jobs on `broker`, on a namespace of its own, removed after."""
    redis_url = require_broker("redis", REDIS_URL)
    ns = unique_namespace(prefix)
    answers: dict[str, Any] = {"result_backend": "none", "queue_namespace": "billing"}
    settings = {"QUEUE_NAMESPACE": ns, "LOCK_URL": redis_url}
    if broker == "redis":
        answers["broker"] = "redis"
        settings["BROKER_URL"] = redis_url
    elif broker.startswith("rabbitmq"):
        answers.update(broker="rabbitmq", rabbitmq_queue_type=broker.split("-")[1])
        settings["BROKER_URL"] = require_broker("rabbitmq", RABBITMQ_URL)
    else:
        answers["broker"] = "sqs"
        settings.update(
            BROKER_URL=request.getfixturevalue("sqs_url"),
            VISIBILITY_TIMEOUT="60",
            TASK_SOFT_TIME_LIMIT="8",
            TASK_TIME_LIMIT="10",
            TASK_RETRY_BACKOFF_MAX="5",
            AWS_ACCESS_KEY_ID="testing",
            AWS_SECRET_ACCESS_KEY="testing",
        )
    proj = Project.copy_of(render(**answers), tmp_path / "billing", PACKAGE, **{**settings, **env})
    proj.broker = broker
    add_fault_jobs(proj)
    if broker == "sqs":
        done = proj.run("queue", "provision")
        assert done.returncode == 0, done.stdout + done.stderr
    with rabbitmq_lock(exclusive=False) if broker != "redis" else contextlib.nullcontext():
        try:
            yield proj
        finally:
            proj.run("dlq", "purge", "--yes")
            remove_namespace(proj, broker, ns)


def remove_namespace(project: Project, broker: str, ns: str) -> None:
    """Delete the lanes and dead-letter stores this test created."""
    url = project.env["BROKER_URL"]
    names = [f"{ns}.{lane}{suffix}" for lane in LANES for suffix in ("", ".dlq")]
    if broker == "redis":
        import redis

        client = redis.Redis.from_url(url)
        keys = [*client.scan_iter(match=f"{ns}*"), *client.scan_iter(match=f"_kombu.binding.{ns}*")]
        if keys:
            client.delete(*keys)
        client.close()
    elif broker.startswith("rabbitmq"):
        from kombu import Connection

        with Connection(url) as connection:
            channel = connection.channel()
            for name in names:
                channel.queue_delete(name)
                channel.exchange_delete(name)
    else:
        client = sqs_client(url)
        for queue_url in client.list_queues(QueueNamePrefix=ns).get("QueueUrls", []):
            client.delete_queue(QueueUrl=queue_url)


def put(project: Project, broker: str, lane: str, messages: list[Hostile]) -> None:
    """Put messages straight on a lane's queue, as a foreign producer would."""
    queue = f"{project.env['QUEUE_NAMESPACE']}.{lane}"
    url = project.env["BROKER_URL"]
    if broker == "redis":
        put_on_redis(url, queue, messages)
    elif broker.startswith("rabbitmq"):
        put_on_rabbitmq(url, queue, messages)
    else:
        client = sqs_client(url)
        queue_url = client.get_queue_url(QueueName=queue.replace(".", "-"))["QueueUrl"]
        put_on_sqs(client, queue_url, queue, messages)
