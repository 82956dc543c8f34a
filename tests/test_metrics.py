"""METRICS_PORT on a live prefork worker: counters, histograms and depths move as jobs run."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from support.faults import add_fault_jobs, dispatch, wait_for
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
