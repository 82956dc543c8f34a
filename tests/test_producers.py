"""A service that never imports the project enqueues its jobs with plain Celery, on every broker.

The producer runs in another process, with only `celery` importable, and writes
what docs/producers.md tells it to write.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from support.faults import rabbitmq_lock, wait_for
from support.projects import Project, unique_namespace, wait_for_files
from support.rabbitmq import lane_policies, remove_namespace

pytestmark = [pytest.mark.broker, pytest.mark.e2e]

PACKAGE = "billing"
LANES = ("critical", "default", "batch")

# The producer's whole configuration per broker, as docs/producers.md gives it.
PRODUCER_CONFIG = {
    "redis": {},
    "rabbitmq-classic": {},
    "rabbitmq-quorum": {
        "task_create_missing_queue_type": "quorum",
        "task_create_missing_queue_exchange_type": "topic",
    },
    "sqs": {"broker_transport_options": {"region": "us-east-1", "is_secure": False}},
}

PRODUCER = """
import importlib.util, json, sys
from celery import Celery

assert importlib.util.find_spec({package!r}) is None, "the producer must not see the project"
app = Celery(broker={broker!r})
app.conf.update(json.loads({config!r}))
for name, kwargs, queue, options in json.loads(sys.stdin.read()):
    print(app.send_task(name, kwargs=kwargs, queue=queue, **options).id)
"""

IDEMPOTENT_JOB = '''"""An idempotent job that leaves one file per run."""

import uuid
from pathlib import Path

from workergen_runtime import job


@job(name="{package}.charge", idempotent=True)
def charge(folder: str, order: str) -> str:
    Path(folder, f"{{order}}.{{uuid.uuid4().hex[:8]}}").write_text("charged")
    return order
'''


def produce(project: Project, variant: str, calls: list[list], tmp_path: Path) -> list[str]:
    """Send `calls` ([name, kwargs, queue, options]) from a plain Celery process."""
    env = {k: v for k, v in project.env.items() if k not in ("PYTHONPATH",)}
    code = PRODUCER.format(
        package=PACKAGE,
        broker=project.env["BROKER_URL"],
        config=json.dumps(PRODUCER_CONFIG[variant]),
    )
    home = tmp_path / "producer"
    home.mkdir(exist_ok=True)
    done = subprocess.run(
        [sys.executable, "-c", code],
        input=json.dumps(calls),
        cwd=home,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.split()


@pytest.fixture(params=["redis", "rabbitmq-classic", "rabbitmq-quorum", "sqs"])
def variant(request) -> str:
    return request.param


@pytest.fixture
def project(variant: str, request, render, tmp_path: Path) -> Iterator[Project]:
    ns = unique_namespace("prod")
    answers: dict[str, str] = {"result_backend": "none", "queue_namespace": "billing"}
    env = {"QUEUE_NAMESPACE": ns}
    if variant == "redis":
        answers["broker"] = "redis"
        env["BROKER_URL"] = request.getfixturevalue("redis_url")
    elif variant.startswith("rabbitmq"):
        answers["broker"] = "rabbitmq"
        answers["rabbitmq_queue_type"] = variant.split("-")[1]
        env["BROKER_URL"] = request.getfixturevalue("rabbitmq_url")
        env["LOCK_URL"] = request.getfixturevalue("redis_url")
    else:
        answers["broker"] = "sqs"
        env.update(
            BROKER_URL=request.getfixturevalue("sqs_url"),
            AWS_ACCESS_KEY_ID="testing",
            AWS_SECRET_ACCESS_KEY="testing",
            LOCK_URL=request.getfixturevalue("redis_url"),
        )
    proj = Project.copy_of(render(**answers), tmp_path / "billing", PACKAGE, **env)
    proj.add_probe_job()
    if variant == "sqs":
        provisioned = proj.run("queue", "provision")
        assert provisioned.returncode == 0, provisioned.stderr
    if variant.startswith("rabbitmq"):
        with rabbitmq_lock(exclusive=False):
            try:
                yield proj
            finally:
                remove_namespace(env["BROKER_URL"], ns, LANES)
    else:
        yield proj


def test_a_plain_celery_producer_enqueues_on_every_lane_with_a_countdown(
    project: Project, variant: str, folder: Path, tmp_path: Path
) -> None:
    ns = project.env["QUEUE_NAMESPACE"]
    calls = [
        [f"{PACKAGE}.probe", {"folder": str(folder), "token": "default"}, f"{ns}.default", {}],
        [f"{PACKAGE}.probe", {"folder": str(folder), "token": "batch"}, f"{ns}.batch", {}],
    ]
    # On quorum lanes the countdown goes through Celery's native delayed delivery.
    later = {"folder": str(folder), "token": "later"}
    calls.append([f"{PACKAGE}.probe", later, f"{ns}.default", {"countdown": 1}])
    tokens = {call[1]["token"] for call in calls}
    with project.worker("--queue", "default,batch", "--concurrency", "2") as worker:
        ids = produce(project, variant, calls, tmp_path)
        ran = wait_for_files(folder, tokens)
    assert len(set(ids)) == len(calls)
    assert set(ran) == tokens
    if variant.startswith("rabbitmq"):
        # The worker sets the lanes' dead-letter policies as it starts.
        wait_for(lambda: "dead-letter policies are set" in worker.log(), 30, "the policies")
        assert sorted(lane_policies(ns)) == sorted(f"{ns}.{lane}.dead-letters" for lane in LANES)


@pytest.mark.parametrize("variant", ["redis"], indirect=True)
def test_a_repeated_idempotency_key_from_a_plain_producer_runs_once(
    project: Project, variant: str, folder: Path, tmp_path: Path
) -> None:
    (project.root / PACKAGE / "jobs" / "charge.py").write_text(
        IDEMPOTENT_JOB.format(package=PACKAGE)
    )
    ns = project.env["QUEUE_NAMESPACE"]
    charge = [
        f"{PACKAGE}.charge",
        {"folder": str(folder), "order": "o-1"},
        f"{ns}.default",
        {"headers": {"idempotency_key": "order-1"}},
    ]
    after = [f"{PACKAGE}.probe", {"folder": str(folder), "token": "after"}, f"{ns}.default", {}]
    with project.worker("--queue", "default", "--concurrency", "1"):
        produce(project, variant, [charge, charge, after], tmp_path)
        wait_for_files(folder, ["after"])
    assert len(list(folder.glob("o-1.*"))) == 1
