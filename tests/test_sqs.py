"""A rendered SQS project end to end against a local SQS (moto in server mode)."""

from __future__ import annotations

import base64
import json
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import boto3
import pytest

from support.projects import Project, unique_namespace, wait_for_files

pytestmark = [pytest.mark.broker, pytest.mark.e2e]

PACKAGE = "billing"
MAX_DELIVERIES = 3

FAILING_JOBS = '''"""Jobs that always fail: one raises, one kills its worker process."""

import os
from pathlib import Path

from {package}.core import job


@job(name="{package}.poison", queue="batch")
class PoisonJob:
    def handle(self, folder: str) -> None:
        with Path(folder, "poison-attempts").open("a") as attempts:
            attempts.write("x\\n")
        raise ValueError("this job never works")


@job(name="{package}.crash")
class CrashJob:
    def handle(self, folder: str) -> None:
        with Path(folder, "crash-attempts").open("a") as attempts:
            attempts.write("x\\n")
        os._exit(1)
'''


def sqs_client(url: str) -> Any:
    parts = urlsplit(url)
    return boto3.client(
        "sqs",
        region_name="us-east-1",
        endpoint_url=f"http://{parts.hostname}:{parts.port}",
        aws_access_key_id=parts.username,
        aws_secret_access_key=parts.password,
    )


@pytest.fixture
def project(render, sqs_url: str, tmp_path: Path) -> Project:
    rendered = render(broker="sqs", result_backend="none", queue_namespace="billing")
    proj = Project.copy_of(
        rendered,
        tmp_path / "billing",
        PACKAGE,
        BROKER_URL=sqs_url,
        QUEUE_NAMESPACE=unique_namespace("sqs"),
        # Short timeouts so SQS redelivers within seconds; the start-up check still holds.
        VISIBILITY_TIMEOUT="4",
        TASK_SOFT_TIME_LIMIT="2",
        TASK_TIME_LIMIT="3",
        TASK_RETRY_BACKOFF="0",
        TASK_RETRY_BACKOFF_MAX="1",
        TASK_MAX_DELIVERIES=str(MAX_DELIVERIES),
        AWS_ACCESS_KEY_ID="testing",
        AWS_SECRET_ACCESS_KEY="testing",
    )
    proj.add_probe_job()
    return proj


def namespace(project: Project) -> str:
    return project.env["QUEUE_NAMESPACE"]


def messages_in(client: Any, queue: str, wait: float = 0) -> list[dict[str, Any]]:
    """Messages currently in a queue, read and released again at once."""
    url = client.get_queue_url(QueueName=queue)["QueueUrl"]
    deadline = time.monotonic() + wait
    while True:
        got = client.receive_message(
            QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=0, WaitTimeSeconds=1
        ).get("Messages", [])
        if got or time.monotonic() >= deadline:
            return got


def decoded(message: dict[str, Any]) -> str:
    """The kombu envelope of an SQS message (kombu base64-encodes it)."""
    return base64.b64decode(message["Body"]).decode()


def provision(project: Project) -> str:
    done = project.run("queue", "provision")
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_provision_creates_queues_with_redrive_idempotently(project: Project, sqs_url: str) -> None:
    ns = namespace(project)
    first = provision(project)
    second = provision(project)
    assert first == second
    assert f"queue={ns}-default  dead-letter={ns}-default-dlq" in first
    client = sqs_client(sqs_url)
    for lane in ("critical", "default", "batch"):
        url = client.get_queue_url(QueueName=f"{ns}-{lane}")["QueueUrl"]
        attributes = client.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
        policy = json.loads(attributes["RedrivePolicy"])
        assert policy["deadLetterTargetArn"].endswith(f":{ns}-{lane}-dlq")
        assert int(policy["maxReceiveCount"]) == MAX_DELIVERIES
        assert attributes["VisibilityTimeout"] == "4"
    names = client.list_queues(QueueNamePrefix=ns)["QueueUrls"]
    assert len(names) == 6


def test_provision_json_describes_the_queues_without_creating_them(
    project: Project, sqs_url: str
) -> None:
    ns = namespace(project)
    done = project.run("queue", "provision", "--json")
    assert done.returncode == 0, done.stderr
    plan = json.loads(done.stdout)
    assert {q["queue"] for q in plan["queues"]} == {f"{ns}-{lane}" for lane in plan_lanes()}
    assert all(q["redrive_policy"]["maxReceiveCount"] == MAX_DELIVERIES for q in plan["queues"])
    assert "QueueUrls" not in sqs_client(sqs_url).list_queues(QueueNamePrefix=ns)


def plan_lanes() -> list[str]:
    return ["critical", "default", "batch"]


def test_worker_refuses_queues_without_a_dead_letter_queue(project: Project) -> None:
    done = project.run("queue", "work", "--queue", "default", timeout=60)
    assert done.returncode == 1
    assert "queue provision" in done.stderr
    assert f"{namespace(project)}-default" in done.stderr


def test_worker_runs_jobs_on_default_and_named_lanes(project: Project, tmp_path: Path) -> None:
    provision(project)
    done = tmp_path / "done"
    done.mkdir()
    with project.worker("--queue", "default,batch", "--concurrency", "2"):
        project.dispatch_probes(done, [f"default-{i}" for i in range(3)])
        project.dispatch_probes(done, [f"batch-{i}" for i in range(3)], lane="batch")
        ran = wait_for_files(
            done, [f"default-{i}" for i in range(3)] + [f"batch-{i}" for i in range(3)]
        )
    assert len(ran) == 6


def test_a_failing_job_reaches_its_lanes_dead_letter_queue_after_max_deliveries(
    project: Project, tmp_path: Path, sqs_url: str
) -> None:
    (project.root / PACKAGE / "jobs" / "failing.py").write_text(
        FAILING_JOBS.format(package=PACKAGE)
    )
    provision(project)
    done = tmp_path / "done"
    done.mkdir()
    client = sqs_client(sqs_url)
    dlq = f"{namespace(project)}-batch-dlq"
    dispatch = project.python(
        f"from {PACKAGE}.jobs.failing import PoisonJob\nPoisonJob.dispatch({str(done)!r})\n"
    )
    assert dispatch.returncode == 0, dispatch.stderr
    with project.worker("--queue", "batch", "--concurrency", "1"):
        project.dispatch_probes(done, ["healthy"], lane="batch")
        wait_for_files(done, ["healthy"])
        dead = messages_in(client, dlq, wait=60)
    assert len(dead) == 1
    assert f"{PACKAGE}.poison" in decoded(dead[0])  # the task message, kept as sent
    attempts = (done / "poison-attempts").read_text().count("x")
    assert attempts == MAX_DELIVERIES


def test_a_job_that_crashes_its_worker_is_dead_lettered_after_bounded_receives(
    project: Project, tmp_path: Path, sqs_url: str
) -> None:
    (project.root / PACKAGE / "jobs" / "failing.py").write_text(
        FAILING_JOBS.format(package=PACKAGE)
    )
    provision(project)
    done = tmp_path / "done"
    done.mkdir()
    client = sqs_client(sqs_url)
    dispatch = project.python(
        f"from {PACKAGE}.jobs.failing import CrashJob\nCrashJob.dispatch({str(done)!r})\n"
    )
    assert dispatch.returncode == 0, dispatch.stderr
    with project.worker("--queue", "default", "--concurrency", "1") as worker:
        dead = messages_in(client, f"{namespace(project)}-default-dlq", wait=150)
        project.dispatch_probes(done, ["after-crash"])
        wait_for_files(done, ["after-crash"])
        log = worker.log()
    assert len(dead) == 1, log[-4000:]
    assert f"{PACKAGE}.crash" in decoded(dead[0])
    attempts = (done / "crash-attempts").read_text().count("x")
    assert 1 <= attempts <= MAX_DELIVERIES


def test_a_pickle_message_is_never_executed_and_is_dead_lettered(
    project: Project, tmp_path: Path, sqs_url: str
) -> None:
    provision(project)
    done = tmp_path / "done"
    done.mkdir()
    send_pickle = (
        f"from {PACKAGE}.core.celery_app import app\n"
        f"from {PACKAGE}.core.queues import qualified_queue\n"
        f"app.send_task('{PACKAGE}.probe', args=[{str(done)!r}, 'pickled'],\n"
        "              serializer='pickle', queue=qualified_queue('default'))\n"
    )
    sent = project.python(send_pickle)
    assert sent.returncode == 0, sent.stderr
    client = sqs_client(sqs_url)
    with project.worker("--queue", "default") as worker:
        project.dispatch_probes(done, ["json-after"])
        wait_for_files(done, ["json-after"])
        dead = messages_in(client, f"{namespace(project)}-default-dlq", wait=150)
        log = worker.log()
    assert not (done / "pickled").exists()
    assert len(dead) == 1, log[-4000:]
    assert "pickle" in decoded(dead[0])
