"""METRICS_PORT on a live prefork worker: counters, histograms and depths move as jobs run."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from support.faults import add_fault_jobs, dispatch, wait_for
from support.hostile import Hostile, put_on_rabbitmq, put_on_redis
from support.operations import free_port, ops_project, scrape, value
from support.projects import Project, wait_for_files

pytestmark = [pytest.mark.broker, pytest.mark.e2e]


@pytest.fixture(params=["redis", "rabbitmq"])
def project(request, render, tmp_path: Path) -> Iterator[Project]:
    with ops_project(request.param, request, render, tmp_path) as proj:
        add_fault_jobs(proj)
        yield proj


def test_counters_histograms_and_depths_move_while_jobs_flow(
    project: Project, folder: Path
) -> None:
    port = free_port()
    ns = project.env["QUEUE_NAMESPACE"]
    probe = "billing.probe"
    with project.worker("--queue", "default", "--concurrency", "2", METRICS_PORT=str(port)):
        before = scrape(port)
        assert value(before, "celery_worker_up", lane="default") == 1
        assert value(before, "celery_broker_up") == 1
        assert value(before, "celery_task_succeeded_total", name=probe) == 0

        # No worker consumes batch: its jobs wait there, and the depth says so.
        project.dispatch_probes(folder, [f"waiting-{i}" for i in range(3)], lane="batch")
        # Redis keeps a message of priority 9 in a sub-list of its own: it counts too.
        urgent = project.python(
            "from billing.jobs.probe import ProbeJob\n"
            f"ProbeJob.dispatch_with(args=[{str(folder)!r}, 'urgent'], lane='batch', priority=9)\n"
        )
        assert urgent.returncode == 0, urgent.stderr
        project.dispatch_probes(folder, [f"ran-{i}" for i in range(6)])
        wait_for_files(folder, [f"ran-{i}" for i in range(6)])
        [pill] = dispatch(project, "always_fails", [str(folder), "pill"])

        def settled() -> dict | None:
            # Depths are cached for a few seconds: wait until a scrape shows the dead letter.
            samples = scrape(port)
            dead = value(samples, "celery_task_dead_lettered_total", name="billing.always_fails")
            depth = value(samples, "celery_dead_letter_queue_length", lane="default")
            return samples if dead >= 1 and depth >= 1 else None

        samples = wait_for(settled, 60, "the dead letter in the metrics")
    default, batch = f"{ns}.default", f"{ns}.batch"
    assert value(samples, "celery_task_succeeded_total", name=probe, queue_name=default) == 6
    assert value(samples, "celery_task_succeeded_total", lane="batch") == 0
    assert value(samples, "celery_task_retried_total", name="billing.always_fails") == 2
    assert (
        value(
            samples,
            "celery_task_failed_total",
            name="billing.always_fails",
            exception="ConnectionError",
        )
        == 1
    )
    assert value(samples, "celery_task_dead_lettered_total", reason="failed", lane="default") == 1
    assert value(samples, "celery_task_runtime_seconds_count", name=probe) == 6
    assert value(samples, "celery_task_queue_wait_seconds_count", name=probe) == 6
    assert value(samples, "celery_queue_length", queue_name=batch, lane="batch") == 4
    assert value(samples, "celery_queue_length", queue_name=default) == 0
    assert value(samples, "celery_dead_letter_queue_length", queue_name=f"{default}.dlq") == 1
    assert pill


def test_a_second_worker_on_the_same_port_runs_jobs_without_metrics(
    project: Project, folder: Path
) -> None:
    port = free_port()
    with project.worker("--queue", "default", METRICS_PORT=str(port), name="first"):
        with project.worker("--queue", "batch", METRICS_PORT=str(port), name="second") as second:
            project.dispatch_probes(folder, ["on-batch"], lane="batch")
            wait_for_files(folder, ["on-batch"])
            assert f"port {port} is taken" in second.log()
        assert value(scrape(port), "celery_worker_up", lane="default") == 1


# A job that lets its soft time limit end it (the fault jobs catch theirs).
SOFT_LIMITED_JOB = """\"\"\"Runs past its soft time limit and lets the exception end it.\"\"\"

import time

from workergen_runtime import job


@job(name="billing.soft_limited", soft_time_limit=1, time_limit=20)
def soft_limited(token: str) -> str:
    time.sleep(10)
    return token
"""
FAILURE_METRICS = ("celery_task_failed_total", "celery_task_dead_lettered_total")


def failure_samples(samples: dict) -> dict[tuple[str, frozenset], float]:
    return {key: v for key, v in samples.items() if key[0] in FAILURE_METRICS and v}


def test_every_kind_of_failure_is_counted_with_its_job_lane_and_queue(
    project: Project, folder: Path, request
) -> None:
    (project.root / "billing" / "jobs" / "soft_limited.py").write_text(SOFT_LIMITED_JOB)
    port = free_port()
    ns = project.env["QUEUE_NAMESPACE"]
    default, batch = f"{ns}.default", f"{ns}.batch"
    with project.worker(
        "--queue",
        "default,batch",
        "--concurrency",
        "2",
        METRICS_PORT=str(port),
        TASK_MAX_DELIVERIES="2",
    ) as worker:
        # Each on the lane it was dispatched to, batch, which is not its own.
        dispatch(project, "always_fails", [str(folder), "exception"], lane="batch")
        dispatch(project, "soft_limited", ["soft"], lane="batch")
        dispatch(project, "overruns", [str(folder), "hard"], lane="batch")
        dispatch(project, "crashes", [str(folder), "lost"], lane="batch")
        # A message whose body is not JSON, on the default lane.
        malformed = Hostile(
            "malformed",
            "body not JSON",
            {"lang": "py", "task": "billing.probe", "id": "bad-malformed", "retries": 0},
            b"\xffnot json",
        )
        broker = project.env["BROKER_URL"]
        put = put_on_redis if broker.startswith("redis") else put_on_rabbitmq
        put(broker, default, [malformed])

        def all_counted() -> dict | None:
            samples = scrape(port)
            dead = value(samples, "celery_task_dead_lettered_total")
            return samples if dead >= 5 else None

        try:
            samples = wait_for(all_counted, 90, "five dead letters in the metrics")
        except AssertionError:
            found = failure_samples(scrape(port))
            raise AssertionError(f"{found}\n{worker.log()[-6000:]}") from None
    found = failure_samples(samples)
    for (metric, labels), _ in found.items():
        shown = dict(labels)
        assert all(shown.get(k) for k in ("name", "lane", "queue_name")), (metric, shown)
    on_batch = {"lane": "batch", "queue_name": batch}
    for name, exception, reason in [
        ("billing.always_fails", "ConnectionError", "failed"),
        ("billing.soft_limited", "SoftTimeLimitExceeded", "failed"),
        ("billing.overruns", "TimeLimitExceeded", "time-limit"),
    ]:
        failed = value(
            samples, "celery_task_failed_total", name=name, exception=exception, **on_batch
        )
        assert failed == 1, (name, found)
        dead = value(
            samples, "celery_task_dead_lettered_total", name=name, reason=reason, **on_batch
        )
        assert dead == 1, (name, found)
    lost = value(samples, "celery_task_dead_lettered_total", name="billing.crashes", **on_batch)
    assert lost == 1, found
    intake = value(
        samples,
        "celery_task_dead_lettered_total",
        name="billing.probe",
        reason="malformed",
        lane="default",
        queue_name=default,
    )
    assert intake == 1, found
