"""Jobs that fail, crash or overrun on purpose, and ways to kill workers by PID."""

from __future__ import annotations

import contextlib
import fcntl
import json
import math
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

from support.projects import Project, Worker

FAULT_JOBS = '''"""Jobs that misbehave on purpose; each leaves files to count runs."""

import os
import time
import uuid
from pathlib import Path

from celery.exceptions import SoftTimeLimitExceeded

from workergen_runtime import job


def _mark(folder: str, token: str, kind: str) -> None:
    Path(folder, f"{{token}}.{{kind}}.{{uuid.uuid4().hex[:8]}}").write_text(str(os.getpid()))


def _fixed(folder: str) -> bool:
    return Path(folder, "fixed").exists()


@job(
    name="{package}.always_fails",
    retry_for=(ConnectionError,),
    max_retries=2,
    backoff=1,
    jitter=False,
)
def always_fails(folder: str, token: str) -> str:
    """Fails with a retried error until the file `fixed` exists."""
    _mark(folder, token, "attempt")
    if not _fixed(folder):
        raise ConnectionError("upstream is down")
    Path(folder, token).write_text("ok")
    return token


@job(name="{package}.crashes")
def crashes(folder: str, token: str) -> str:
    """Kills the process running it until the file `fixed` exists."""
    _mark(folder, token, "attempt")
    if not _fixed(folder):
        os._exit(1)
    Path(folder, token).write_text("ok")
    return token


@job(name="{package}.slow")
def slow(folder: str, token: str, seconds: float) -> str:
    """Says it started, sleeps, then leaves one `<token>.done.*` file per run.

    Each run also leaves a `<token>.begun.*` file, so runs cut short count too.
    """
    Path(folder, f"{{token}}.started").write_text(str(os.getpid()))
    _mark(folder, token, "begun")
    time.sleep(seconds)
    _mark(folder, token, "done")
    return token


@job(name="{package}.overruns", soft_time_limit=1, time_limit=2)
def overruns(folder: str, token: str) -> str:
    """Notes its soft time limit (a `<token>.soft.*` file) and ignores it: the hard one kills it."""
    _mark(folder, token, "attempt")
    try:
        time.sleep(30)
    except SoftTimeLimitExceeded:
        _mark(folder, token, "soft")
        time.sleep(30)
    return token
'''

RABBITMQ_LOCK = Path(os.environ.get("TMPDIR", "/tmp")) / "workergen-rabbitmq-restart.lock"


def add_fault_jobs(project: Project) -> None:
    """Add the misbehaving jobs to a project copy, as a user adds a job module."""
    target = project.root / project.package / "jobs" / "faults.py"
    target.write_text(FAULT_JOBS.format(package=project.package))


def dispatch(project: Project, job: str, *calls: list, lane: str | None = None) -> list[str]:
    """Dispatch `job` once per argument list, from another process; returns the task ids."""
    code = (
        "import json\n"
        f"import {project.package}\n"
        "from workergen_runtime.celery_app import app\n"
        "from workergen_runtime.discovery import import_jobs\n"
        "import_jobs()\n"
        f"task = app.tasks['{project.package}.{job}']\n"
        f"ids = [task.dispatch_with(args=args, lane={lane!r}).id for args in {calls!r}]\n"
        "print(json.dumps(ids))\n"
    )
    done = project.python(code)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def runs(folder: Path, token: str, kind: str) -> int:
    """How many `<token>.<kind>.*` files the job left: one per run."""
    return len(list(folder.glob(f"{token}.{kind}.*")))


def dead_letters(project: Project, *args: str, **env: str) -> list[dict]:
    """`dlq list --json [args]`, parsed."""
    done = project.run("dlq", "list", "--json", *args, **env)
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines() if line.strip()]


# What a worker logs for each letter it stores (workergen_runtime.deadletter.routing).
DEAD_LETTERED = "Dead-lettered "


def wait_for_dead_letters(
    project: Project,
    count: int,
    timeout: float,
    worker: Worker | None = None,
    *,
    logged_before: int = 0,
    **env: str,
) -> list[dict]:
    """`dlq list --json` once it shows `count` letters; fails after `timeout` seconds.

    A listing is a process of its own: with the worker that stores the letters, it runs
    once the worker's log says it stored that many (beyond `logged_before`, the letters it
    logged earlier and that are listed no more), at most once a second, and every few
    seconds regardless (a letter the broker moved, such as an SQS redrive, is in no
    worker's log). Without a worker, it runs every second.
    """
    deadline = time.monotonic() + timeout
    listed_at = -math.inf
    while True:
        now = time.monotonic()
        late = now > deadline
        since = now - listed_at
        logged = (
            worker is not None
            and since > 1
            and worker.log().count(DEAD_LETTERED) >= logged_before + count
        )
        if worker is None or late or logged or since > 3:
            letters = dead_letters(project, **env)
            listed_at = now
            if len(letters) >= count:
                return letters
            if late:
                log = worker.log() if worker else ""
                stored = f", {log.count(DEAD_LETTERED)} logged by the worker" if worker else ""
                reasons = sorted({str(x.get("reason")) for x in letters})
                raise AssertionError(
                    f"timed out after {timeout} s waiting for {count} dead letter(s): "
                    f"{len(letters)} listed {reasons}{stored}"
                    + (f"\nthe worker's log ends:\n{log[-4000:]}" if worker else "")
                )
        time.sleep(1 if worker is None else 0.2)


def wait_for(predicate, timeout: float, what: str, interval: float = 0.3):
    """Poll until predicate() is truthy; return its value or fail saying what was awaited."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def child_pids(pid: int) -> list[int]:
    """The direct children of a process (Linux /proc)."""
    children: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        with contextlib.suppress(OSError):
            children += [int(c) for c in (task / "children").read_text().split()]
    return children


def kill_worker_outright(worker: Worker) -> None:
    """SIGKILL the worker's main process and its pool children, as a machine crash would."""
    assert worker.process is not None
    main = worker.process.pid
    victims = child_pids(main)
    os.kill(main, signal.SIGKILL)
    for pid in victims:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    worker.process.wait(10)


def kill_worker_group(worker: Worker) -> None:
    """SIGKILL the whole process group our worker leads (its pidfile's PID), as a crash would."""
    assert worker.process is not None and worker.own_group
    pid = int(worker.pidfile.read_text().strip())
    assert pid == worker.process.pid == os.getpgid(pid), "only the group of our own worker"
    os.killpg(pid, signal.SIGKILL)
    worker.process.wait(10)


@contextlib.contextmanager
def rabbitmq_lock(exclusive: bool) -> Iterator[None]:
    """Tests using RabbitMQ share this lock; the test that restarts RabbitMQ holds it alone."""
    with RABBITMQ_LOCK.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
