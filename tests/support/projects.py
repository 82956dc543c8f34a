"""Rendered projects and their worker processes, driven as a user would drive them."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterable
from pathlib import Path

from support.brokers import REDIS_URL

PROBE_JOB = '''"""A job that leaves a file behind, so tests can see it ran and where."""

import os
from pathlib import Path

from workergen_runtime import job


@job(name="{package}.probe")
class ProbeJob:
    """Write <folder>/<token> holding the id of the worker that ran it."""

    def handle(self, folder: str, token: str) -> str:
        owner = os.environ.get("PROBE_OWNER", "?")
        Path(folder, token).write_text(owner)
        return token
'''


class Project:
    """A rendered project copied to its own folder, with the environment to run it."""

    def __init__(self, root: Path, package: str, env: dict[str, str]) -> None:
        self.root = root
        self.package = package
        # Every job's "received" and "succeeded" lines, so tests can follow jobs in the log.
        self.env = {
            **os.environ,
            "PYTHONPATH": str(root),
            "LOG_FORMAT": "text",
            "LOG_EVERY_JOB": "true",
            # Locks in the suite's own Redis database, not the local db 0 fallback.
            "LOCK_URL": REDIS_URL,
            **env,
        }

    @classmethod
    def copy_of(cls, rendered: Path, dest: Path, package: str, **env: str) -> Project:
        """Copy a rendered project (so a test may add jobs to it) and set its settings."""
        shutil.copytree(rendered, dest, ignore=shutil.ignore_patterns("__pycache__"))
        return cls(dest, package, env)

    def add_probe_job(self) -> None:
        """Add the probe job, as a user adds a job: a new module under jobs/."""
        target = self.root / self.package / "jobs" / "probe.py"
        target.write_text(PROBE_JOB.format(package=self.package))

    def run(self, *args: str, timeout: float = 60, **env: str) -> subprocess.CompletedProcess[str]:
        """Run the project's CLI (`python -m <package> ...`)."""
        return subprocess.run(
            [sys.executable, "-m", self.package, *args],
            cwd=self.root,
            env={**self.env, **env},
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    def python(
        self, code: str, timeout: float = 60, **env: str
    ) -> subprocess.CompletedProcess[str]:
        """Run a Python snippet in the project's environment (another process)."""
        return subprocess.run(
            [sys.executable, "-c", code],
            cwd=self.root,
            env={**self.env, **env},
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    def dispatch_probes(self, folder: Path, tokens: Iterable[str], lane: str | None = None) -> None:
        """Dispatch one probe job per token from a separate producer process."""
        code = (
            f"from {self.package}.jobs.probe import ProbeJob\n"
            f"for token in {list(tokens)!r}:\n"
            f"    ProbeJob.dispatch_with(args=[{str(folder)!r}, token], lane={lane!r})\n"
        )
        done = self.python(code)
        assert done.returncode == 0, done.stderr

    def send_raw(
        self, task: str, args: list[str], *, task_id: str | None = None, serializer: str = "json"
    ) -> None:
        """Put a message straight on the default lane's queue, as a foreign producer would."""
        code = (
            f"import {self.package}\n"
            "from workergen_runtime.celery_app import app\n"
            "from workergen_runtime.queues import qualified_queue\n"
            f"queue = qualified_queue('default', app.settings.queue_namespace)\n"
            f"app.send_task({task!r}, args={args!r}, task_id={task_id!r},\n"
            f"              serializer={serializer!r}, queue=queue)\n"
        )
        done = self.python(code)
        assert done.returncode == 0, done.stderr

    def worker(
        self,
        *args: str,
        name: str = "worker",
        launcher: Iterable[str] = (),
        own_group: bool = False,
        **env: str,
    ) -> Worker:
        """A worker process of this project (a context manager).

        `launcher` goes before the command (e.g. `unshare`); it must exec the worker, so
        the PID started is the worker's. `own_group`: the worker leads a process group
        of its own, as a supervisor (systemd, supervisord) starts it.
        """
        return Worker(self, list(args), name, env, list(launcher), own_group)


class Worker:
    """`queue work` in a subprocess, started with --pidfile and stopped by that PID."""

    def __init__(
        self,
        project: Project,
        args: list[str],
        name: str,
        env: dict[str, str],
        launcher: list[str] | None = None,
        own_group: bool = False,
    ) -> None:
        self.project = project
        self.args = args
        self.name = name
        self.env = env
        self.launcher = launcher or []
        self.own_group = own_group
        tag = uuid.uuid4().hex[:8]
        self.pidfile = project.root / f"{name}-{tag}.pid"
        self.logfile = project.root / f"{name}-{tag}.log"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self, ready_timeout: float = 60) -> Worker:
        log = self.logfile.open("wb")
        self.process = subprocess.Popen(
            [
                *self.launcher,
                sys.executable,
                "-m",
                self.project.package,
                "queue",
                "work",
                "--pidfile",
                str(self.pidfile),
                "--hostname",
                f"{self.name}-{uuid.uuid4().hex[:6]}@%h",
                *self.args,
            ],
            cwd=self.project.root,
            env={**self.project.env, **self.env},
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=self.own_group,
        )
        log.close()
        deadline = time.monotonic() + ready_timeout
        while time.monotonic() < deadline:
            if "ready." in self.log():
                return self
            if self.process.poll() is not None:
                raise AssertionError(f"worker exited early:\n{self.log()}")
            time.sleep(0.2)
        self.stop()
        raise AssertionError(f"worker not ready in {ready_timeout} s:\n{self.log()}")

    def log(self) -> str:
        return self.logfile.read_text(errors="replace") if self.logfile.exists() else ""

    def stop(self, timeout: float = 20) -> None:
        """Warm shutdown by PID; kill the process group's leader if it does not stop."""
        if self.process is not None:
            terminate(self.process, timeout)

    def __enter__(self) -> Worker:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def terminate(process: subprocess.Popen[bytes], timeout: float = 20) -> int | None:
    """SIGTERM by PID; SIGKILL if it has not ended in `timeout` s. Returns the exit code."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(5)
    return process.returncode


def wait_for_files(folder: Path, names: Iterable[str], timeout: float = 60) -> dict[str, str]:
    """Wait until every named file exists in folder; return name -> content."""
    wanted = set(names)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        present = {p.name for p in folder.iterdir()} & wanted
        if present == wanted:
            return {name: (folder / name).read_text() for name in wanted}
        time.sleep(0.2)
    missing = sorted(wanted - {p.name for p in folder.iterdir()})
    raise AssertionError(f"jobs did not run within {timeout} s; missing: {missing}")


def redis_project(render, redis_url: str, tmp_path: Path, prefix: str, **env: str) -> Project:
    """A copy of the Redis project `billing` (no result backend) on a namespace of its own."""
    rendered = render(broker="redis", result_backend="none", queue_namespace="billing")
    return Project.copy_of(
        rendered,
        tmp_path / "billing",
        "billing",
        BROKER_URL=redis_url,
        QUEUE_NAMESPACE=unique_namespace(prefix),
        **env,
    )


# Every namespace this test process handed out; the session deletes their queues and keys.
CREATED_NAMESPACES: list[str] = []


def unique_namespace(prefix: str = "t") -> str:
    """A namespace no other test (or earlier run) uses."""
    namespace = f"{prefix}{uuid.uuid4().hex[:10]}"
    CREATED_NAMESPACES.append(namespace)
    return namespace
