"""Idempotent jobs whose worker process dies: the redelivered message does the work, once.

A delivery claims the job's key before it runs. When its process is SIGKILLed, the broker
delivers the message again and finds that claim: the redelivery must take it over (same
host, process gone) or come back once it expires (another host), never skip the work.
Locks live in the local Redis (LOCK_URL) whatever the broker.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from support.faults import child_pids, kill_worker_outright, runs, wait_for, wait_for_dead_letters
from support.projects import Project, Worker
from support.scheduling import BROKERS, broker_project, give_body, make

pytestmark = [pytest.mark.broker, pytest.mark.e2e]

# Leaves `<token>.started.*` when it starts and `<token>.done.*` only when it completes.
CHARGE_BODY = """    def handle(self, folder: str, token: str, seconds: float) -> None:
        import os
        import time
        import uuid
        from pathlib import Path

        Path(folder, f"{token}.started.{uuid.uuid4().hex[:8]}").write_text(str(os.getpid()))
        time.sleep(seconds)
        Path(folder, f"{token}.done.{uuid.uuid4().hex[:8]}").write_text(str(os.getpid()))
"""
# Producer code that writes a key's state in Redis, as a delivery elsewhere would.
SET_STATE = (
    "import billing\n"
    "from workergen_runtime.idempotency import storage_key\n"
    "from workergen_runtime.locks import lock_client\n"
    "from workergen_runtime.settings import get_settings\n"
    "def set_state(key, value, ttl):\n"
    "    settings = get_settings()\n"
    "    name = storage_key('billing.charge', key, settings.queue_namespace)\n"
    "    lock_client(settings).set(name, value, ex=ttl)\n"
)
SKIPPED = "idempotent job billing.charge skipped"
TOOK_OVER = "idempotent job billing.charge: took over key"


@pytest.fixture(params=BROKERS)
def project(request, render, redis_url: str, tmp_path: Path) -> Iterator[Project]:
    with broker_project(request, render, redis_url, tmp_path) as proj:
        make(proj, "make:job", "Charge", "--idempotent")
        give_body(proj.root / "billing/jobs/charge.py", CHARGE_BODY)
        yield proj


def charge(project: Project, code: str) -> None:
    """Run producer code with ChargeJob imported, in another process."""
    sent = project.python(f"from billing.jobs.charge import ChargeJob\n{code}")
    assert sent.returncode == 0, sent.stderr


def started_pid(folder: Path, token: str) -> int:
    # The job creates the file, then writes its pid: wait for the pid, not only the file.
    [pid] = wait_for(
        lambda: [p.read_text() for p in folder.glob(f"{token}.started.*") if p.read_text()],
        30,
        f"{token} to start",
    )
    return int(pid)


def completes_once_after_a_takeover(folder: Path, worker: Worker) -> None:
    """The victim's redelivery on `worker` took the lost claim over and did the work once."""
    wait_for(lambda: runs(folder, "victim", "done"), 120, "the redelivered job to complete")
    wait_for(lambda: "succeeded" in worker.log(), 30, "the delivery to be acknowledged")
    log = worker.log()
    assert runs(folder, "victim", "started") == 2
    assert runs(folder, "victim", "done") == 1
    assert log.count(TOOK_OVER) == 1, log[-3000:]
    assert SKIPPED not in log, log[-3000:]


def test_an_idempotent_job_whose_pool_child_is_killed_runs_once_after_redelivery(
    project: Project, folder: Path
) -> None:
    with project.worker("--concurrency", "2") as worker:
        charge(project, f"ChargeJob.dispatch({str(folder)!r}, 'victim', 4)")
        child = started_pid(folder, "victim")
        assert worker.process is not None
        assert child in child_pids(worker.process.pid), "only our own worker's child is killed"
        os.kill(child, signal.SIGKILL)
        completes_once_after_a_takeover(folder, worker)


def test_an_idempotent_job_of_a_worker_killed_outright_runs_once_on_the_next_worker(
    project: Project, folder: Path
) -> None:
    first = project.worker("--concurrency", "2", name="first").start()
    try:
        charge(project, f"ChargeJob.dispatch({str(folder)!r}, 'victim', 4)")
        started_pid(folder, "victim")
    finally:
        kill_worker_outright(first)
    with project.worker("--concurrency", "2", name="second") as second:
        completes_once_after_a_takeover(folder, second)


def test_a_claim_held_on_another_host_defers_the_job_until_that_claim_ends(
    project: Project, folder: Path
) -> None:
    # Claims left by deliveries of the same messages on a host this worker cannot inspect:
    # one whose process died (its claim expires), one still working (it finishes).
    claims = {"k-lost": ("lost-1", 4), "k-finished": ("finished-1", 8)}
    seed = (
        f"for key, (task_id, ttl) in {claims!r}.items():\n"
        "    set_state(key, f'running@elsewhere/4242/99:{task_id}:0', ttl)\n"
        f"for key, (task_id, _) in {claims!r}.items():\n"
        f"    ChargeJob.dispatch_with(args=[{str(folder)!r}, key, 0], idempotency_key=key,\n"
        "                            task_id=task_id)\n"
    )
    with project.worker("--concurrency", "2") as worker:
        charge(project, SET_STATE + seed)
        wait_for(lambda: worker.log().count("deferred") >= 2, 30, "both deliveries deferred")
        # The process still working finishes before its claim expires.
        charge(project, SET_STATE + "set_state('k-finished', 'done', 60)\n")
        wait_for(lambda: runs(folder, "k-lost", "done"), 60, "the lost claim's job to run")
        wait_for(lambda: SKIPPED in worker.log(), 60, "the finished claim's copy to be skipped")
        log = worker.log()
    assert runs(folder, "k-lost", "done") == 1
    assert runs(folder, "k-finished", "started") == 0
    assert f"{SKIPPED}: key " in log and "k-finished is done" in log, log[-3000:]
    assert log.count(SKIPPED) == 1, log[-3000:]


# Fails its first attempt with a retried error, completes the next one.
FLAKY_BODY = """    def handle(self, folder: str, token: str) -> None:
        import os
        import uuid
        from pathlib import Path

        Path(folder, f"{token}.started.{uuid.uuid4().hex[:8]}").write_text(str(os.getpid()))
        if not Path(folder, f"{token}.failed").exists():
            Path(folder, f"{token}.failed").write_text("")
            raise ConnectionError("upstream is down")
        Path(folder, f"{token}.done.{uuid.uuid4().hex[:8]}").write_text(str(os.getpid()))
"""


def test_a_retry_continues_the_work_and_a_duplicate_of_the_failed_attempt_is_skipped(
    project: Project, folder: Path
) -> None:
    make(project, "make:job", "Flaky", "--idempotent", "--retry-for", "ConnectionError")
    module = project.root / "billing/jobs/flaky.py"
    give_body(module, FLAKY_BODY)
    module.write_text(
        module.read_text().replace("idempotent=True", "idempotent=True, backoff=4, jitter=False")
    )
    send = (
        "from billing.jobs.flaky import FlakyJob\n"
        f"FlakyJob.apply_async(args=[{str(folder)!r}, 'order-5'], task_id='flaky-1')\n"
    )
    # One process: the duplicate runs where the failed attempt ran, while its retry waits.
    with project.worker("--concurrency", "1") as worker:
        sent = project.python(send)
        assert sent.returncode == 0, sent.stderr
        wait_for(lambda: "billing.flaky[flaky-1] retry:" in worker.log(), 30, "a retry")
        sent = project.python(send)
        assert sent.returncode == 0, sent.stderr
        wait_for(lambda: runs(folder, "order-5", "done"), 60, "the retry to complete")
        wait_for(lambda: "idempotent job billing.flaky skipped" in worker.log(), 30, "a skip")
        log = worker.log()
    assert runs(folder, "order-5", "started") == 2
    assert runs(folder, "order-5", "done") == 1
    assert log.count("idempotent job billing.flaky skipped") == 1, log[-3000:]
    assert "took over" not in log, log[-3000:]


# Kills its own process while `<token>.crash` exists; records a completed run otherwise.
CRASHING_BODY = """    def handle(self, folder: str, token: str) -> None:
        import os
        import uuid
        from pathlib import Path

        Path(folder, f"{token}.started.{uuid.uuid4().hex[:8]}").write_text(str(os.getpid()))
        if Path(folder, f"{token}.crash").exists():
            os._exit(1)
        Path(folder, f"{token}.done.{uuid.uuid4().hex[:8]}").write_text(str(os.getpid()))
"""


def test_an_idempotent_job_dead_lettered_after_crashing_runs_when_replayed(
    project: Project, folder: Path
) -> None:
    # Its process dies on every delivery, so no delivery can release the key itself:
    # dead-lettering does, and the replay (a new task id) is not taken for a duplicate.
    give_body(project.root / "billing/jobs/charge.py", CRASHING_BODY)
    (folder / "lost.crash").touch()
    with project.worker("--queue", "default", "--concurrency", "1", TASK_MAX_DELIVERIES="2") as w:
        charge(project, f"ChargeJob.dispatch({str(folder)!r}, 'lost')")
        [letter] = wait_for_dead_letters(project, 1, 120, w)
        assert letter["reason"] == "delivery-limit", letter
        assert runs(folder, "lost", "started") == 2
        (folder / "lost.crash").unlink()
        replayed = project.run("dlq", "replay", "--all")
        assert replayed.returncode == 0, replayed.stdout + replayed.stderr
        wait_for(lambda: runs(folder, "lost", "done"), 60, "the replayed job to complete")
        log = w.log()
    assert runs(folder, "lost", "done") == 1
    assert SKIPPED not in log, log[-3000:]
