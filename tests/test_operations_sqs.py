"""doctor and metrics on SQS (a local moto server): redrive policies and message counts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from support.faults import wait_for
from support.operations import free_port, scrape, value
from support.projects import Project, unique_namespace, wait_for_files

pytestmark = [pytest.mark.broker, pytest.mark.e2e]


@pytest.fixture
def project(render, sqs_url: str, redis_url: str, tmp_path: Path) -> Project:
    rendered = render(broker="sqs", result_backend="none", queue_namespace="billing")
    proj = Project.copy_of(
        rendered,
        tmp_path / "billing",
        "billing",
        BROKER_URL=sqs_url,
        LOCK_URL=redis_url,
        QUEUE_NAMESPACE=unique_namespace("sqsop"),
        AWS_ACCESS_KEY_ID="testing",
        AWS_SECRET_ACCESS_KEY="testing",
    )
    proj.add_probe_job()
    return proj


def doctor(project: Project) -> tuple[int, dict[str, dict]]:
    done = project.run("doctor", "--json")
    assert "Traceback" not in done.stderr, done.stderr
    return done.returncode, {c["name"]: c for c in map(json.loads, done.stdout.splitlines())}


def test_doctor_fails_until_the_queues_are_provisioned(project: Project) -> None:
    ns = project.env["QUEUE_NAMESPACE"]
    code, checks = doctor(project)
    assert code == 1
    dead = checks["dead-letter queues"]
    assert not dead["ok"] and f"{ns}-batch-dlq" in dead["detail"]
    assert dead["fix"] == "Run: queue provision"
    provisioned = project.run("queue", "provision")
    assert provisioned.returncode == 0, provisioned.stderr
    code, checks = doctor(project)
    assert code == 0, checks
    assert f"{ns}-default-dlq" in checks["dead-letter queues"]["detail"]


def test_metrics_count_jobs_and_read_sqs_message_counts(project: Project, folder: Path) -> None:
    assert project.run("queue", "provision").returncode == 0
    port = free_port()
    ns = project.env["QUEUE_NAMESPACE"]
    with project.worker("--queue", "default", "--concurrency", "2", METRICS_PORT=str(port)):
        project.dispatch_probes(folder, ["a", "b", "c"])
        project.dispatch_probes(folder, ["left-1", "left-2"], lane="batch")
        wait_for_files(folder, ["a", "b", "c"])

        def counted() -> dict | None:
            samples = scrape(port)
            done = value(samples, "celery_task_succeeded_total", name="billing.probe")
            waiting = value(samples, "celery_queue_length", queue_name=f"{ns}-batch")
            return samples if done == 3 and waiting == 2 else None

        samples = wait_for(counted, 60, "the SQS counts in the metrics")
    assert value(samples, "celery_queue_length", queue_name=f"{ns}-default") == 0
    assert value(samples, "celery_dead_letter_queue_length", queue_name=f"{ns}-default-dlq") == 0
