"""Generated jobs and crons on real brokers: dispatch, scheduling, leader election, overlap,
idempotency. Locks live in the local Redis (LOCK_URL) whatever the broker."""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from support.projects import Project
from support.scheduling import (
    BROKERS,
    SchedulerProcess,
    broker_project,
    make,
    make_traced,
    runs,
    wait_until,
)

pytestmark = [pytest.mark.broker, pytest.mark.e2e]


@pytest.fixture(params=BROKERS)
def project(request, render, redis_url: str, tmp_path: Path) -> Iterator[Project]:
    with broker_project(request, render, redis_url, tmp_path) as proj:
        yield proj


def test_a_made_job_is_dispatched_and_run_by_a_worker(project: Project):
    make(project, "make:job", "SendInvoice", "--queue", "batch")
    make_traced(project.root / "billing/jobs/send_invoice.py")
    trace = Path(project.env["TRACE_FILE"])

    with project.worker("--queue", "batch"):
        sent = project.run("queue", "dispatch", "send_invoice", "--args", '["inv-1"]')
        assert sent.returncode == 0, sent.stderr
        wait_until(lambda: len(runs(trace)) == 1, 60, "the job's run")
    assert "('inv-1',)" in trace.read_text()


def test_a_made_cron_fires_through_schedule_work(project: Project):
    make(project, "make:cron", "Heartbeat", "--schedule", "every_seconds(3)")
    make_traced(project.root / "billing/crons/heartbeat.py")
    trace = Path(project.env["TRACE_FILE"])

    with project.worker("--queue", "default"), SchedulerProcess(project):
        wait_until(lambda: len(runs(trace)) >= 2, 60, "two cron runs")


def test_two_schedulers_fire_each_tick_once_and_a_standby_takes_over(project: Project):
    make(project, "make:cron", "Heartbeat", "--schedule", "every_seconds(4)")
    make_traced(project.root / "billing/crons/heartbeat.py")
    trace = Path(project.env["TRACE_FILE"])
    # A dead leader's lock expires after SCHEDULER_LEADER_TTL: 6 s here, not the default 20.
    ttl = {"SCHEDULER_LEADER_TTL": "6"}

    with project.worker("--queue", "default", "--concurrency", "2"):
        first = SchedulerProcess(project, "first", **ttl).start()
        second = SchedulerProcess(project, "second", **ttl).start()
        try:
            wait_until(lambda: len(runs(trace)) >= 4, 90, "four cron runs")
            leader, standby = (
                (first, second) if "elected leader" in first.log() else (second, first)
            )
            assert "elected leader" in leader.log()
            assert "standing by" in standby.log()
            assert "elected leader" not in standby.log()
            fired = len(runs(trace))
            leader.kill()  # no clean-up: its lock must expire for the standby to lead
            killed_at = time.monotonic()
            wait_until(lambda: "elected leader" in standby.log(), 60, "the standby's election")
            took = time.monotonic() - killed_at
            wait_until(lambda: len(runs(trace)) >= fired + 2, 60, "runs after the takeover")
        finally:
            first.stop()
            second.stop()
    # The lock expired after its 6 s, and the standby tries every 2 s.
    assert 4 < took < 12, f"the standby led {took:.1f} s after the leader died"
    starts = sorted(runs(trace))
    gaps = [later - earlier for earlier, later in itertools.pairwise(starts)]
    # Ticks are 4 s apart; a tick fired by both schedulers would show as two runs together.
    assert min(gaps) > 2, starts


def test_a_cron_still_running_at_its_next_tick_is_skipped_and_logged(project: Project):
    make(project, "make:cron", "Slow", "--schedule", "every_seconds(2)")
    make_traced(project.root / "billing/crons/slow.py")
    trace = Path(project.env["TRACE_FILE"])

    with (
        project.worker("--queue", "default", "--concurrency", "3", TRACE_SLEEP="4") as worker,
        SchedulerProcess(project),
    ):
        wait_until(lambda: "skipped" in worker.log(), 60, "a skipped run")
        # The first run frees its lock when it ends: a later tick runs again.
        wait_until(lambda: len(runs(trace)) >= 2, 60, "a run after the first one ended")
        log = worker.log()
    assert "cron billing.crons.slow skipped: the previous run still holds cron-lock:" in log
    starts = sorted(runs(trace))
    # Never two runs at once: each run starts after the previous one's 4 s.
    assert all(later - earlier >= 3.5 for earlier, later in itertools.pairwise(starts)), starts


def test_an_idempotent_job_delivered_twice_does_its_work_once(project: Project):
    make(project, "make:job", "Charge", "--idempotent")
    make_traced(project.root / "billing/jobs/charge.py")
    trace = Path(project.env["TRACE_FILE"])
    # The same message twice (same task id), as a redelivery after a lost ack would bring it,
    # then the same explicit key on two separate dispatches, then another key.
    send = (
        "from billing.jobs.charge import ChargeJob\n"
        "ChargeJob.apply_async(args=['order-1'], task_id='delivery-1')\n"
        "ChargeJob.apply_async(args=['order-1'], task_id='delivery-1')\n"
        "ChargeJob.dispatch_with(args=['order-2'], idempotency_key='k2')\n"
        "ChargeJob.dispatch_with(args=['order-2b'], idempotency_key='k2')\n"
        "ChargeJob.dispatch('order-3')\n"
    )
    with project.worker("--queue", "default", "--concurrency", "2", TRACE_SLEEP="2") as worker:
        sent = project.python(send)
        assert sent.returncode == 0, sent.stderr
        wait_until(lambda: worker.log().count("succeeded") >= 5, 60, "five deliveries handled")
        log = worker.log()
    lines = trace.read_text().splitlines()
    assert len([line for line in lines if "'order-1'" in line]) == 1, lines
    assert len([line for line in lines if "order-2" in line]) == 1, lines
    assert len([line for line in lines if "'order-3'" in line]) == 1, lines
    assert log.count("idempotent job billing.charge skipped") == 2, log[-3000:]


def test_an_idempotent_job_runs_again_after_failing_for_good(project: Project):
    make(project, "make:job", "Charge", "--idempotent")
    job = project.root / "billing/jobs/charge.py"
    make_traced(job)
    job.write_text(job.read_text() + '        raise RuntimeError("declined")\n')
    trace = Path(project.env["TRACE_FILE"])
    send = (
        "from billing.jobs.charge import ChargeJob\n"
        "ChargeJob.dispatch_with(args=['order-9'], idempotency_key='k9')\n"
    )
    with project.worker("--queue", "default"):
        for attempt in (1, 2):
            sent = project.python(send)
            assert sent.returncode == 0, sent.stderr
            wait_until(lambda n=attempt: len(runs(trace)) == n, 60, f"run {attempt}")


def test_schedule_list_and_run_once(project: Project):
    make(project, "make:cron", "Every", "--schedule", "* * * * *")
    make(project, "make:cron", "Nightly", "--schedule", 'daily(at="02:00")')
    make_traced(project.root / "billing/crons/every.py")
    make_traced(project.root / "billing/crons/nightly.py")
    trace = Path(project.env["TRACE_FILE"])

    listed = project.run("schedule", "list")
    assert listed.returncode == 0, listed.stderr
    assert "billing.crons.every  lane=default  schedule=* * * * *  next=" in listed.stdout
    assert "billing.crons.nightly  lane=default  schedule=0 2 * * *  next=" in listed.stdout

    due = project.run("schedule", "run")
    assert due.returncode == 0, due.stderr
    assert "ran billing.crons.every" in due.stdout
    one = project.run("schedule", "run", "nightly")
    assert one.returncode == 0, one.stderr
    assert one.stdout.strip() == "ran billing.crons.nightly"
    assert len(runs(trace)) == (3 if "nightly" in due.stdout else 2)
