"""Starting and stopping the sample project's worker and scheduler, by PID."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

SAMPLE = Path(__file__).resolve().parent / "sample"


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


@contextmanager
def running(
    tmp_path: Path,
    *args: str,
    env: dict[str, str] | None = None,
    name: str = "worker",
    started: Callable[[], Any] | None = None,
) -> Iterator[subprocess.Popen]:
    """`manage.py workergen ARGS --pidfile ...` running until the block ends, then stopped.

    A command without --pidfile (monitor) is given `started`, which says when it is up;
    it is stopped by the PID of the process started here.
    """
    pidfile = tmp_path / f"{name}.pid"
    log = (tmp_path / f"{name}.log").open("w")
    process = subprocess.Popen(
        [sys.executable, "manage.py", "workergen", *args]
        + ([] if started else ["--pidfile", str(pidfile)]),
        cwd=SAMPLE,
        env={**os.environ, **(env or {})},
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        wait_for(started or pidfile.exists, 60, f"{name} started ({tmp_path / f'{name}.log'})")
        yield process
    finally:
        if process.poll() is None:
            pid = int(pidfile.read_text().strip()) if pidfile.exists() else process.pid
            os.kill(pid, signal.SIGTERM)
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                os.kill(pid, signal.SIGKILL)
                process.wait(10)
        log.close()


def work(tmp_path: Path, env: dict[str, str] | None = None, name: str = "worker"):
    """A worker on every lane, one process."""
    return running(
        tmp_path, "queue", "work", "--concurrency", "1", "--hostname", f"{name}@%h",
        env=env, name=name,
    )  # fmt: skip


def wait_for(check: Callable[[], Any], timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for: {what}")
        time.sleep(0.3)
