"""How `queue work` starts a Celery worker: pure functions, tested without a broker."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from workergen_runtime import project
from workergen_runtime.errors import ProjectError
from workergen_runtime.queues import qualified_queue

POOLS = ("prefork", "solo", "threads", "gevent")
# The pools that run on a library the project does not install by default: the
# project's extra (pyproject.toml) that installs it.
POOL_EXTRAS = {"gevent": "gevent"}


@dataclass(frozen=True)
class PoolChoice:
    pool: str | None
    note: str | None = None


def choose_pool(requested: str | None, platform: str) -> PoolChoice:
    """Celery's default pool, except on Windows where prefork is unreliable: solo."""
    if requested:
        return PoolChoice(requested)
    if platform.startswith("win"):
        return PoolChoice("solo", "Windows: using the solo pool (prefork is unreliable there).")
    return PoolChoice(None)


def prepare_pool(pool: str | None) -> None:
    """Patch the standard library for a green pool, as `celery worker` does; refuse a missing one.

    Under gevent every blocking call (sockets, sleep, locks) must yield to the other
    jobs, so the library's patches go in before the worker opens a connection or
    starts a thread. A pool whose library is not installed is refused here, in a
    line that names the extra to install, not deep in the worker's start-up.
    """
    extra = POOL_EXTRAS.get(pool or "")
    if extra is None:
        return
    from celery import maybe_patch_concurrency

    try:
        maybe_patch_concurrency(["--pool", str(pool)])
    except ImportError as exc:
        distribution = project.PACKAGE.replace("_", "-")
        others = ", ".join(name for name in POOLS if name not in POOL_EXTRAS)
        raise ProjectError(
            f"The {pool} pool needs the {extra} package, which cannot be imported ({exc}).\n"
            f"Install it with: pip install '{distribution}[{extra}]' (or use --pool {others})."
        ) from None


def worker_argv(
    *,
    lanes: list[str],
    loglevel: str,
    pool: str | None,
    concurrency: int | None = None,
    prefetch: int | None = None,
    pidfile: Path | None = None,
    hostname: str | None = None,
    namespace: str,
) -> list[str]:
    """The `celery worker` arguments; the worker never runs the scheduler."""
    argv = [
        "worker",
        "--queues",
        ",".join(qualified_queue(lane, namespace) for lane in lanes),
        "--loglevel",
        loglevel.upper(),
        "--hostname",
        hostname or f"{project.PACKAGE}-{'-'.join(lanes)}@%h",
        "--without-mingle",
        "--without-gossip",
    ]
    if pool:
        argv += ["--pool", pool]
    if concurrency:
        argv += ["--concurrency", str(concurrency)]
    if prefetch:
        argv += ["--prefetch-multiplier", str(prefetch)]
    if pidfile:
        argv += ["--pidfile", str(pidfile)]
    return argv


def run_worker(celery_app: Any, argv: list[str]) -> int:
    """Run `celery worker` with these arguments; returns the worker's exit code.

    Celery's own `worker_main` drops the code, so a worker that stopped on an
    unrecoverable error would exit 0 and a supervisor would not restart it.

    The `worker` command is called without the `celery` group around it: importing
    the group imports every other `celery` command and the plugins installed for it
    (Flower, with Tornado and prometheus_client), a tenth of a second the worker
    would spend before it starts. What the group would do for `worker` is done here:
    its context holds the app, and the app's own worker and preload options are added.
    """
    from celery.bin.base import CLIContext
    from celery.bin.worker import worker

    command, *args = argv
    if command != "worker":
        raise ValueError(f"not a worker command line: {argv!r}")
    known = {param.name for param in worker.params}
    for group in ("worker", "preload"):
        worker.params.extend(
            option for option in celery_app.user_options.get(group, ()) if option.name not in known
        )
    context = CLIContext(app=celery_app, no_color=None, workdir=None)
    code = worker.main(args=args, prog_name="celery worker", obj=context, standalone_mode=False)
    return code or 0
