"""A real worker of the sample Django project, on the broker and PostgreSQL.

The tests that need a worker share the session's (conftest.py's fixture `worker`) and
wait on what they sent; a test whose worker runs with settings of its own starts it.
"""

from __future__ import annotations

import psycopg
import pytest
from accounts.jobs.welcome import backend_pid, broken, welcome
from accounts.models import Account
from django.db import connection
from workers import dead_letter_recorded, manage, together, wait_for, work

from conftest import POSTGRES_URL, RESULTS_NAMESPACE, SharedWorker, broker_independent
from support.operations import free_port, scrape, value

pytestmark = pytest.mark.django_db(transaction=True)


def welcomed(account: Account) -> bool:
    account.refresh_from_db()
    return account.welcomed


def test_a_job_reads_and_writes_the_orm(worker: SharedWorker) -> None:
    account = Account.objects.create(email="ada@example.com")
    welcome.dispatch(account.pk)
    wait_for(lambda: welcomed(account), 60, "the account welcomed")


def test_the_worker_closes_a_jobs_database_connection_when_the_job_ends(
    worker: SharedWorker,
) -> None:
    account = Account.objects.create(email="bob@example.com")

    def note() -> str:
        account.refresh_from_db()
        return account.note

    def backend_gone(pid: int) -> bool:
        with psycopg.connect(POSTGRES_URL, autocommit=True) as admin:
            found = admin.execute("SELECT 1 FROM pg_stat_activity WHERE pid = %s", (pid,))
            return found.fetchone() is None

    backend_pid.dispatch(account.pk)
    first = int(wait_for(note, 60, "the first job's connection").split()[1])
    # Celery's Django fixup closed it after the job: the server's backend has ended.
    wait_for(lambda: backend_gone(first), 10, f"backend {first} closed after the job")
    # And the server ends every other connection to the database (a restart, a
    # failover): the worker's next job opens a new one and succeeds.
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
    Account.objects.filter(pk=account.pk).update(note="")
    backend_pid.dispatch(account.pk)
    second = wait_for(note, 60, "the second job, on a connection of its own")
    assert second != f"pid {first}"


def test_a_dispatch_inside_a_transaction_is_sent_on_commit_and_not_after_a_rollback(
    client, worker: SharedWorker
) -> None:
    created = client.get("/sign-up", {"email": "cy@example.com"})
    assert created.status_code == 200
    account = Account.objects.get(pk=created.json()["id"])
    wait_for(lambda: welcomed(account), 60, "the job that sees the committed row")
    failed = client.get("/sign-up", {"email": "dee@example.com", "fail": "1"})
    assert failed.status_code == 500
    assert not Account.objects.filter(email="dee@example.com").exists()
    # A job sent after the rolled-back one: once it has run, so would have that one.
    later = client.get("/sign-up", {"email": "eve@example.com"})
    account = Account.objects.get(pk=later.json()["id"])
    wait_for(lambda: welcomed(account), 60, "the job sent after the rollback")
    # Nothing was sent for the rolled-back row: no dead letter of a missing account.
    listed = manage("dlq", "list")
    assert listed.returncode == 0, listed.stderr
    assert "accounts.welcome" not in listed.stdout, listed.stdout


def test_a_failing_job_is_dead_lettered_and_the_dlq_commands_work(worker: SharedWorker) -> None:
    sent = broken.dispatch(7)
    letter = dead_letter_recorded(sent.id).id
    # One command at a time: on RabbitMQ a reader holds the letters it reads, and
    # another reader meanwhile does not see them.
    listed = manage("dlq", "list")
    assert listed.returncode == 0, listed.stderr
    found = [line for line in listed.stdout.splitlines() if "accounts.broken" in line]
    assert len(found) == 1, listed.stdout
    line = found[0]
    assert "account 7 cannot be welcomed" in line
    assert line.split()[0] == letter, line
    shown = manage("dlq", "show", letter)
    assert shown.returncode == 0 and "accounts.broken" in shown.stdout, shown.stderr
    replayed = manage("dlq", "replay", letter)
    assert replayed.returncode == 0 and "replayed" in replayed.stdout, replayed.stderr
    # The worker ran the replayed job, a new one: it failed again, a dead letter of its own.
    again = dead_letter_recorded(replayed.stdout.split(" as ")[1].split()[0])
    assert again.id != letter and again.args == [7], again
    purged = manage("dlq", "purge", "--yes")
    assert purged.returncode == 0 and "purged" in purged.stdout, purged.stderr
    assert "accounts.broken" not in manage("dlq", "list").stdout


def test_doctor_runs_through_manage_py() -> None:
    done = manage("doctor")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "broker" in done.stdout.lower()


@broker_independent
def test_an_unknown_command_is_a_message_not_a_traceback() -> None:
    done = manage("no-such-command")
    assert done.returncode != 0
    assert "Traceback" not in done.stderr and "no-such-command" in done.stderr


@broker_independent
def test_make_job_writes_a_job_and_its_test_in_the_app_and_the_projects_tests_pass(
    tmp_path,
) -> None:
    import shutil
    import subprocess
    import sys

    from workers import SAMPLE

    project = tmp_path / "project"
    shutil.copytree(SAMPLE, project, ignore=shutil.ignore_patterns("__pycache__"))
    # Refused without --app whatever the other writes: both at once.
    done, refused = together(
        lambda: manage("make:job", "SendWelcomeEmail", "--app", "accounts", cwd=project),
        lambda: manage("make:job", "Other", cwd=project),
    )
    assert done.returncode == 0, done.stderr
    assert "created accounts/jobs/send_welcome_email.py" in done.stdout
    assert "created accounts/test_send_welcome_email.py" in done.stdout
    assert (
        'name="accounts.send_welcome_email"'
        in (project / "accounts" / "jobs" / "send_welcome_email.py").read_text()
    )
    assert refused.returncode == 1 and "--app" in refused.stderr
    assert "Traceback" not in refused.stderr
    tests = subprocess.run(
        [sys.executable, "-m", "pytest", "-q"],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert tests.returncode == 0, tests.stdout[-5000:] + tests.stderr[-3000:]
    assert "4 passed" in tests.stdout, tests.stdout


def test_the_database_scheduler_runs_an_entry_once_per_due_time_under_the_leader_lock(
    tmp_path, worker: SharedWorker
) -> None:
    import itertools

    from accounts.models import Tick
    from django_celery_beat.models import IntervalSchedule, PeriodicTask
    from workers import all_running, start

    every = IntervalSchedule.objects.create(every=1, period=IntervalSchedule.SECONDS)
    PeriodicTask.objects.create(name="tick every second", task="accounts.tick", interval=every)
    database = {"WORKERGEN_TEST_DJANGO_SCHEDULER": "database"}
    schedulers = [
        start(tmp_path, "schedule", "work", env=database, name=f"scheduler{n}") for n in (1, 2)
    ]

    def read_logs() -> list[str]:
        return [scheduler.log_path.read_text() for scheduler in schedulers]

    with all_running(*schedulers):
        # Both up, one leading and one standing by; then five due times, one at a time.
        wait_for(
            lambda: all("elected leader" in log or "standing by" in log for log in read_logs()),
            60,
            "both schedulers leading or standing by",
        )
        wait_for(lambda: Tick.objects.count() >= 5, 60, "the entry fired five times")
    logs = read_logs()
    assert sum("elected leader" in log for log in logs) == 1, logs
    assert sum("standing by" in log for log in logs) == 1, logs
    leader, standby = logs if "elected leader" in logs[0] else logs[::-1]
    # Only the leader sent the entry.
    assert "Sending due task tick every second" in leader, leader
    assert "Sending due task" not in standby, standby
    times = sorted(Tick.objects.values_list("at", flat=True))
    gaps = [(later - earlier).total_seconds() for earlier, later in itertools.pairwise(times)]
    # A due time fired twice runs twice a moment apart; once per due time, about a
    # second apart (one may run a few tenths late on a busy machine).
    assert len(times) >= 5 and min(gaps) > 0.3, gaps


@broker_independent
def test_schedule_list_shows_the_entries_made_in_the_admin() -> None:
    from django_celery_beat.models import CrontabSchedule, IntervalSchedule, PeriodicTask

    every = IntervalSchedule.objects.create(every=30, period=IntervalSchedule.SECONDS)
    PeriodicTask.objects.create(name="tick every 30 s", task="accounts.tick", interval=every)
    nightly = CrontabSchedule.objects.create(minute="0", hour="3")
    PeriodicTask.objects.create(
        name="nightly tick", task="accounts.tick", crontab=nightly, enabled=False
    )

    listed, crons_only = together(
        lambda: manage("schedule", "list", env={"WORKERGEN_TEST_DJANGO_SCHEDULER": "database"}),
        lambda: manage("schedule", "list"),
    )

    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    assert any(
        line.startswith("tick every 30 s  task=accounts.tick  lane=default")
        and "every 30 seconds" in line
        and "(database)" in line
        for line in lines
    ), listed.stdout
    assert any(
        line.startswith("nightly tick  task=accounts.tick") and "next=disabled" in line
        for line in lines
    ), listed.stdout
    assert "no crons" not in listed.stdout
    assert crons_only.returncode == 0, crons_only.stderr
    assert "tick every 30 s" not in crons_only.stdout


def test_with_django_results_a_jobs_result_is_stored_in_the_database(tmp_path) -> None:
    from django_celery_results.models import TaskResult

    # Lanes of its own: the shared worker keeps no results, and must not take these jobs.
    # Nothing else uses them, so the session's end waits for the worker to stop.
    results = {"WORKERGEN_TEST_DJANGO_RESULTS": "true", "QUEUE_NAMESPACE": RESULTS_NAMESPACE}
    account = Account.objects.create(email="fay@example.com")
    dispatch = ("queue", "dispatch", "accounts.welcome", "--args", f"[{account.pk}]")
    with work(tmp_path, env=results, stop_later=True):
        # --wait reads the result back from the database; RESULT_BACKEND_URL is unset.
        sent, waited = together(
            lambda: manage(*dispatch, env=results),
            lambda: manage(*dispatch, "--wait", "60", env=results),
        )
        assert sent.returncode == 0, sent.stderr
        task_id = sent.stdout.split("id=")[1].split()[0]
        stored = wait_for(
            lambda: TaskResult.objects.filter(task_id=task_id, status="SUCCESS").first(),
            60,
            "the job's result in the database",
        )
    assert stored.result == '"fay@example.com"'
    assert waited.returncode == 0, waited.stderr
    assert 'result "fay@example.com"' in waited.stdout


def get(port: int, path: str, auth: str | None = None) -> tuple[int, str]:
    """GET on 127.0.0.1:port; (status, body), 0 when nothing answers."""
    import base64
    import urllib.error
    import urllib.request

    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}")
    if auth:
        request.add_header("Authorization", "Basic " + base64.b64encode(auth.encode()).decode())
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, ""
    except (urllib.error.URLError, ConnectionError):
        return 0, ""


def test_monitor_through_manage_py_sees_the_worker(tmp_path, worker: SharedWorker) -> None:
    from workers import running

    port, auth = free_port(), "ops:s3cret-pass"
    # Flower takes no job: the session's end waits for it to stop.
    with running(
        tmp_path,
        "monitor",
        "--port",
        str(port),
        env={"MONITOR_BASIC_AUTH": auth},
        name="monitor",
        started=lambda: get(port, "/healthcheck")[0] == 200,
        stop_later=True,
    ):
        seen = wait_for(
            lambda: f"{worker.hostname}@" in get(port, "/api/workers?refresh=1", auth)[1],
            60,
            "Flower to list the worker",
        )
        assert seen
        assert get(port, "/api/workers")[0] == 401


def test_a_workers_metrics_count_the_django_jobs(worker: SharedWorker) -> None:
    def served() -> bool:
        try:
            scrape(worker.metrics_port)
        except OSError:
            return False
        return True

    def counted() -> float:
        return value(
            scrape(worker.metrics_port), "celery_task_succeeded_total", name="accounts.welcome"
        )

    # The shared worker ran other welcome jobs before (each test waited for its own).
    wait_for(served, 30, "the worker's metrics served")
    before = counted()
    account = Account.objects.create(email="gus@example.com")
    welcome.dispatch(account.pk)
    wait_for(lambda: welcomed(account), 60, "the account welcomed")
    assert wait_for(lambda: counted() > before, 30, "the succeeded job counted")
    assert counted() == before + 1


def test_setup_refuses_answers_that_are_not_a_django_projects() -> None:
    import types

    from workergen_runtime.django import setup
    from workergen_runtime.errors import ConfigurationError

    answers = types.ModuleType("billing.project")
    with pytest.raises(ConfigurationError, match="FRAMEWORK = 'django'"):
        setup(answers)
