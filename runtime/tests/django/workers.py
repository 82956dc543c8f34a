"""Starting and stopping the sample project's worker and scheduler, by PID."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

SAMPLE = Path(__file__).resolve().parent / "sample"

# Set once the session's shared worker started: a test that needs the lanes to itself
# (the priority test) must run before it.
SHARED_WORKER: list[bool] = []


def manage(*args: str, env: dict[str, str] | None = None, cwd: Path = SAMPLE, **kw: Any):
    """`python manage.py workergen ARGS` in the sample project; the finished process."""
    return subprocess.run(
        [sys.executable, "manage.py", "workergen", *args],
        cwd=cwd,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=120,
        **kw,
    )


def together(*calls: Callable[[], Any]) -> list[Any]:
    """What each call returns, the calls made at once (each `manage` is a Python process
    that sets Django up): for calls whose outcomes do not depend on one another."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(len(calls)) as pool:
        return list(pool.map(lambda call: call(), calls))


@dataclass
class Process:
    """A `manage.py workergen` process started here, with its log."""

    name: str
    process: subprocess.Popen
    pidfile: Path | None
    log: IO[str]
    log_path: Path
    stopping: bool = field(default=False)

    def stop(self) -> None:
        """Ask it to stop (SIGTERM, to the PID its pidfile names when it has one)."""
        if self.process.poll() is None and not self.stopping:
            os.kill(self.pid(), signal.SIGTERM)
        self.stopping = True

    def stopped(self) -> None:
        """Wait until it has stopped (SIGKILL after 30 s), and close its log."""
        self.stop()
        try:
            self.process.wait(30)
        except subprocess.TimeoutExpired:
            os.kill(self.pid(), signal.SIGKILL)
            self.process.wait(10)
        self.log.close()

    def pid(self) -> int:
        if self.pidfile is not None and self.pidfile.exists():
            return int(self.pidfile.read_text().strip())
        return self.process.pid


# Processes asked to stop whose end nothing waits on yet: the next worker on the
# same lanes waits for them before it takes jobs, and the session's end does.
STOPPING: list[Process] = []


def all_stopped() -> None:
    """Wait for every process of STOPPING to end."""
    while STOPPING:
        STOPPING.pop().stopped()


def start(
    tmp_path: Path,
    *args: str,
    env: dict[str, str] | None = None,
    name: str = "worker",
    pidfile: bool = True,
) -> Process:
    """`manage.py workergen ARGS [--pidfile ...]` started, not waited for."""
    path = tmp_path / f"{name}.pid" if pidfile else None
    log_path = tmp_path / f"{name}.log"
    log = log_path.open("w")
    process = subprocess.Popen(
        [sys.executable, "manage.py", "workergen", *args]
        + ([] if path is None else ["--pidfile", str(path)]),
        cwd=SAMPLE,
        env={**os.environ, **(env or {})},
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    return Process(name, process, path, log, log_path)


def wait_started(started: Process, check: Callable[[], Any] | None = None) -> None:
    """Until `check` (by default: its pidfile exists) says it is up; stopped if it never is."""
    up = check or started.pidfile.exists
    try:
        wait_for(up, 60, f"{started.name} started ({started.log_path})")
    except BaseException:
        started.stopped()
        raise


@contextmanager
def all_running(*processes: Process) -> Iterator[tuple[Process, ...]]:
    """Started processes (with pidfiles), up until the block ends; then stopped, all at once."""
    try:
        for process in processes:
            wait_for(process.pidfile.exists, 60, f"{process.name} started ({process.log_path})")
        yield processes
    finally:
        for process in processes:
            process.stop()
        for process in processes:
            process.stopped()


@contextmanager
def running(
    tmp_path: Path,
    *args: str,
    env: dict[str, str] | None = None,
    name: str = "worker",
    started: Callable[[], Any] | None = None,
    stop_later: bool = False,
) -> Iterator[subprocess.Popen]:
    """`manage.py workergen ARGS --pidfile ...` running until the block ends, then stopped.

    A command without --pidfile (monitor) is given `started`, which says when it is up;
    it is stopped by the PID of the process started here. With stop_later it is only
    asked to stop: STOPPING has it, and whatever needs it gone waits (all_stopped).
    """
    process = start(tmp_path, *args, env=env, name=name, pidfile=started is None)
    wait_started(process, started)
    try:
        yield process.process
    finally:
        if stop_later:
            process.stop()
            STOPPING.append(process)
        else:
            process.stopped()


def worker_args(name: str) -> tuple[str, ...]:
    """The arguments of a worker on every lane, one process, named `name`@host."""
    return ("queue", "work", "--concurrency", "1", "--hostname", f"{name}@%h")


def work(tmp_path: Path, env: dict[str, str] | None = None, name: str = "worker", **kw: Any):
    """A worker on every lane, one process."""
    return running(tmp_path, *worker_args(name), env=env, name=name, **kw)


def dead_letters() -> list[Any]:
    """The run's dead letters, read in this process from the store `dlq list` reads."""
    from workergen_runtime.deadletter import store_for
    from workergen_runtime.settings import get_settings

    store = store_for(get_settings())
    try:
        return store.list()
    finally:
        store.close()


def dead_letter_recorded(task_id: str, timeout: float = 60) -> Any:
    """Wait until the store has the dead letter of the job `task_id`; that letter."""

    def recorded() -> Any:
        return next((letter for letter in dead_letters() if letter.task_id == task_id), None)

    return wait_for(recorded, timeout, f"the dead letter of job {task_id}")


def wait_for(check: Callable[[], Any], timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for: {what}")
        time.sleep(0.1)
