"""How `queue work` starts a Celery worker: pure functions, tested without a broker."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from . import project
from .queues import qualified_queue

POOLS = ("prefork", "solo", "threads", "gevent")


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
