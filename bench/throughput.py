"""Worker throughput: a stock Celery app against a generated project, on the same broker.

    python bench/throughput.py [--broker redis|rabbitmq|all] [--tasks 2000] [--concurrency N]
                               [--repeat 3] [--variants [--only TEXT]]

For each broker (loopback only) it fills a queue with N no-op tasks, starts one
worker, and times the drain: from the first task taken off the queue to the
queue being empty. The stock app uses Celery's defaults (prefetch 4, early ack,
WARNING logs); the generated project (rendered from this checkout for that
broker) runs `queue work --queue default` with its own defaults (late ack,
reject on worker lost, dead-lettering, delivery counting, time limits, the
default lane's prefetch, JSON logs at INFO). `--variants` also times single
changes on either side, to show what each guarantee costs.

Contenders run in rounds (`--repeat`), so a slow spell on a shared machine hits
all of them; the medians are printed with the spread, and the CPU time per task
of the worker's main process and of its pool processes (from /proc), which
other load on the machine does not change.

Workers are started with --pidfile and stopped by their PID; every queue used
is unique to the run and deleted afterwards.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from running import (
    BROKERS,
    delete_exchanges,
    delete_queue,
    forget_namespace,
    loopback_broker,
    project_lanes,
    stop,
    worker_cpu,
    write_stock_app,
)
from running import render_project as render

PACKAGE = "benchproj"
DRAIN_TIMEOUT = 600

NOOP_JOB = f'''"""A job that does nothing, for the throughput benchmark."""

from workergen_runtime import job


@job(name="{PACKAGE}.noop", queue="default")
class NoopJob:
    def handle(self) -> None:
        return None
'''


@dataclass
class Contender:
    """One worker set-up: how to fill its queue and how to start its worker."""

    label: str
    queue: str
    cwd: Path
    fill: list[str]
    work: list[str]
    env: dict[str, str] = field(default_factory=dict)
    # Commands run before the fill, in `cwd` (SQS: `queue provision`).
    prepare: list[list[str]] = field(default_factory=list)
    # A generated project's QUEUE_NAMESPACE: its lanes, dead letters and
    # policies are deleted after the run too.
    namespace: str | None = None


def render_project(dest: Path, broker: str) -> Path:
    """A project generated for `broker` (the working tree's template), with a no-op job."""
    render(dest, PACKAGE, broker=broker)
    (dest / PACKAGE / "jobs" / "noop.py").write_text(NOOP_JOB)
    return dest


class QueueDepth:
    """Counts the messages waiting in a queue over one open connection."""

    def __init__(self, url: str) -> None:
        self.url = url
        if url.startswith("redis"):
            import redis

            self.redis = redis.Redis.from_url(url)
        else:
            from kombu import Connection

            self.connection = Connection(url)
            self.channel = self.connection.channel()

    def __call__(self, queue: str) -> int:
        if self.url.startswith("redis"):
            return int(self.redis.llen(queue))
        return self.channel.queue_declare(queue, passive=True).message_count

    def close(self) -> None:
        if self.url.startswith("redis"):
            self.redis.close()
        else:
            self.connection.release()


@dataclass
class Measurement:
    """One drain: tasks/s, CPU per task in the worker's main process and its pool.

    `helpers_s` is the CPU, in seconds, that the worker's other child processes
    used during the drain (WorkerCpu's `helpers`): one-off, not per task.
    """

    rate: float
    main_ms: float | None
    pool_ms: float | None
    helpers_s: float | None = None


def run(
    contender: Contender,
    url: str,
    tasks: int,
    scratch: Path,
    depth_of: Callable[[str], QueueDepth] = QueueDepth,
    delete: Callable[[str, str], None] = delete_queue,
) -> Measurement:
    """Fill the queue, start the worker, measure the drain.

    `depth_of(url)` counts a queue's messages and `delete(url, queue)` removes
    it afterwards (bench/sqs.py passes its own for SQS).
    """
    env = {**os.environ, **contender.env}
    for command in (*contender.prepare, contender.fill):
        subprocess.run(
            command, cwd=contender.cwd, env=env, check=True, timeout=300, stdout=subprocess.DEVNULL
        )
    depth = depth_of(url)
    queued = depth(contender.queue)
    if queued != tasks:
        raise SystemExit(f"{contender.label}: expected {tasks} queued, found {queued}")
    pidfile = scratch / f"{uuid.uuid4().hex[:8]}.pid"
    log = (scratch / f"{contender.queue}.log").open("wb")
    worker = subprocess.Popen(
        [*contender.work, "--pidfile", str(pidfile)],
        cwd=contender.cwd,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + DRAIN_TIMEOUT
        started = None
        while time.monotonic() < deadline:
            left = depth(contender.queue)
            now = time.perf_counter()
            if started is None and left < tasks:
                started, start_left = now, left
                cpu_before = worker_cpu(worker.pid)
            if started is not None and left == 0:
                # The first poll saw `start_left` left: that many ran in the timed span.
                cpu_after = worker_cpu(worker.pid)
                rate = start_left / (now - started)
                if not (cpu_before and cpu_after):
                    return Measurement(rate, None, None)
                main_ms = (cpu_after.main - cpu_before.main) * 1000 / start_left
                pool_ms = (cpu_after.pool - cpu_before.pool) * 1000 / start_left
                return Measurement(rate, main_ms, pool_ms, cpu_after.helpers - cpu_before.helpers)
            if worker.poll() is not None:
                log.flush()
                tail = Path(log.name).read_text(errors="replace")[-2000:]
                raise SystemExit(f"{contender.label}: worker exited early:\n{tail}")
            time.sleep(0.05)
        raise SystemExit(f"{contender.label}: queue not drained in {DRAIN_TIMEOUT} s")
    finally:
        stop(worker)
        log.close()
        depth.close()
        delete(url, contender.queue)
        if contender.namespace and url.startswith(("redis", "amqp")):
            forget_namespace(url, contender.namespace, [], project_lanes(contender.cwd, PACKAGE))
        elif url.startswith("amqp"):  # stock Celery's queue has an exchange of its name
            delete_exchanges(url, [contender.queue])
        elif url.startswith("redis"):  # and on Redis, that exchange's bindings
            forget_namespace(url, contender.queue, [])


def contenders(
    url: str,
    project: Path,
    stock_dir: Path,
    tasks: int,
    concurrency: int,
    variants: bool,
    only: str | None = None,
) -> list[Contender]:
    python = sys.executable

    def stock(label: str, *extra: str, **conf: object) -> Contender:
        queue = f"bench-stock-{uuid.uuid4().hex[:8]}"
        return Contender(
            label=label,
            queue=queue,
            cwd=stock_dir,
            fill=[
                python,
                "-c",
                f"from stock_app import noop\nfor _ in range({tasks}):\n    noop.delay()\n",
            ],
            work=[
                python,
                "-m",
                "celery",
                "-A",
                "stock_app",
                "worker",
                "--concurrency",
                str(concurrency),
                "--without-mingle",
                "--without-gossip",
                *extra,
            ],
            env={"BENCH_BROKER_URL": url, "BENCH_QUEUE": queue, "BENCH_CONF": json.dumps(conf)},
        )

    def generated(label: str, *extra: str, **env: str) -> Contender:
        namespace = f"bench{uuid.uuid4().hex[:8]}"
        return Contender(
            label=label,
            queue=f"{namespace}.default",
            namespace=namespace,
            cwd=project,
            fill=[
                python,
                "-c",
                f"from {PACKAGE}.jobs.noop import NoopJob\n"
                f"for _ in range({tasks}):\n"
                "    NoopJob.dispatch()\n",
            ],
            work=[
                python,
                "-m",
                PACKAGE,
                "queue",
                "work",
                "--queue",
                "default",
                "--concurrency",
                str(concurrency),
                *extra,
            ],
            env={
                "BROKER_URL": url,
                "QUEUE_NAMESPACE": namespace,
                "PYTHONPATH": str(project),
                **env,
            },
        )

    chosen = [stock("stock Celery"), generated("generated")]
    if variants:
        chosen += [
            stock("stock, --loglevel INFO", "--loglevel", "INFO"),
            stock(
                "stock, acks_late + prefetch 1", task_acks_late=True, worker_prefetch_multiplier=1
            ),
            stock("stock, acks_late", task_acks_late=True),
            stock("stock, time limits 300/330 s", task_soft_time_limit=300, task_time_limit=330),
            stock("stock, max 1000 tasks per child", worker_max_tasks_per_child=1000),
            generated("generated, prefetch 1 (a long-job lane)", "--prefetch", "1"),
            generated("generated, prefetch 8", "--prefetch", "8"),
            # Redis checks that 16 reserved jobs of TASK_TIME_LIMIT cannot outwait it.
            generated("generated, prefetch 16", "--prefetch", "16", VISIBILITY_TIMEOUT="6000"),
            generated("generated, LOG_EVERY_JOB=true", LOG_EVERY_JOB="true"),
            generated("generated, 1000 tasks per child", WORKER_MAX_TASKS_PER_CHILD="1000"),
        ]
        if url.startswith("amqp"):
            # The lanes' policy check fails at once (nothing listens there) instead
            # of starting rabbitmqctl: the drain without that one-off CPU.
            chosen.append(
                generated(
                    "generated, no rabbitmqctl policy check",
                    RABBITMQ_MANAGEMENT_URL="http://127.0.0.1:9",
                )
            )
    if only:
        chosen = [c for c in chosen if c.label in ("stock Celery", "generated") or only in c.label]
    return chosen


def median(values: list[float | None]) -> float | None:
    known = [value for value in values if value is not None]
    return statistics.median(known) if known else None


def cpu_per_task(measured: list[Measurement]) -> float | None:
    """The median over drains of main + pool CPU per task, in ms."""
    return median(
        [m.main_ms + m.pool_ms for m in measured if m.main_ms is not None and m.pool_ms is not None]
    )


def report(broker: str, runs: dict[str, list[Measurement]]) -> None:
    """Median tasks/s, ratio to stock Celery, spread, and CPU per task."""
    base = median([m.rate for m in runs["stock Celery"]]) or 1.0
    stock_cpu = cpu_per_task(runs["stock Celery"])
    for label, measured in runs.items():
        rates = [m.rate for m in measured]
        rate = median(rates) or 0.0
        main_ms = median([m.main_ms for m in measured])
        pool_ms = median([m.pool_ms for m in measured])
        helpers_s = median([m.helpers_s for m in measured])
        cpu = (
            f"  cpu/task main {main_ms:.3f} ms, pool {pool_ms:.3f} ms"
            if main_ms is not None and pool_ms is not None
            else ""
        )
        both = cpu_per_task(measured)
        if cpu and stock_cpu and both:
            cpu += f" ({both / stock_cpu:.2f}x stock's main + pool)"
        if helpers_s:
            cpu += f"  (+{helpers_s:.2f} s CPU in helper processes)"
        print(
            f"{broker:<9} {label:<38} {rate:6.0f} tasks/s {rate / base:5.2f}x stock"
            f"  ({min(rates):.0f}-{max(rates):.0f}){cpu}"
        )


def parse_options(parser: argparse.ArgumentParser, tasks: int) -> argparse.Namespace:
    """The options of the throughput benches (this one and bench/sqs.py), parsed."""
    parser.add_argument("--tasks", type=int, default=tasks)
    parser.add_argument("--concurrency", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--variants", action="store_true", help="also time single changes")
    parser.add_argument("--only", help="with --variants: just those whose label contains this")
    parser.add_argument(
        "--repeat", type=int, default=3, help="rounds over all contenders; medians are printed"
    )
    return parser.parse_args()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--broker", choices=[*BROKERS, "all"], default="all")
    options = parse_options(parser, tasks=2000)

    brokers = list(BROKERS) if options.broker == "all" else [options.broker]
    scratch = Path(tempfile.mkdtemp(prefix="workergen-throughput-"))
    try:
        stock_dir = scratch / "stock"
        stock_dir.mkdir()
        write_stock_app(stock_dir)
        print(f"{options.tasks} no-op tasks, concurrency {options.concurrency}, prefork pool")
        for name in brokers:
            url = loopback_broker(name)
            if url is None:
                continue
            project = render_project(scratch / f"project-{name}", name)
            chosen = contenders(
                url,
                project,
                stock_dir,
                options.tasks,
                options.concurrency,
                options.variants,
                options.only,
            )
            runs: dict[str, list[Measurement]] = {contender.label: [] for contender in chosen}
            # Rounds over every contender, so a slow spell on a shared machine
            # hits all of them rather than one.
            for _ in range(options.repeat):
                for contender in chosen:
                    runs[contender.label].append(run(contender, url, options.tasks, scratch))
            report(name, runs)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
