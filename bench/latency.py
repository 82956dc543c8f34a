"""Dispatch-to-start latency on an idle worker: stock Celery against a generated project.

    python bench/latency.py [--broker redis|rabbitmq|all] [--jobs 1000] [--gap 0.02]
                            [--concurrency N] [--record-url redis://127.0.0.1:6379/0]

For each broker (loopback only) it starts two workers side by side, a stock
Celery app (library defaults, `--without-mingle --without-gossip`) and a
project generated for that broker (`queue work --queue default`, all its
guarantees), on RabbitMQ also a third: stock Celery waiting for the broker to
confirm each publish (`confirm_publish`), as the project does so that a
dispatch returns only once RabbitMQ has the job. It sends them jobs one at a
time, in turn:
the producer stamps `time.time()` in the job's arguments just before it
dispatches, the job's first line subtracts it from its own `time.time()` and
pushes the difference to a Redis list (`--record-url`), and the producer waits
for that figure and `--gap` seconds more before the next job, so every job
finds its worker idle. The first jobs of each worker are a warm-up, not
counted. Printed: p50, p90, p99 and the maximum of each worker, in
milliseconds, and each worker's ratio to stock Celery.

Workers are started with --pidfile and stopped by their PID; the queues and
keys of the run are deleted afterwards.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import uuid
from dataclasses import dataclass
from pathlib import Path

from running import (
    forget_namespace,
    percentile,
    project_lanes,
    run_on_brokers,
    stop,
    worker_bench_options,
)
from running import render_project as render

PACKAGE = "benchproj"
WARMUP = 20

STAMP_JOB = f'''"""A job that records how long after its dispatch it started."""

from bench_record import record
from workergen_runtime import job


@job(name="{PACKAGE}.stamp", queue="default")
class StampJob:
    def handle(self, key: str, sent: float) -> None:
        record(key, sent)
'''

CONFIRMED = "stock, confirms"
PRODUCER = f"""\
import json
import os
import sys
import time

import redis

from stock_app import stamp
from {PACKAGE}.jobs.stamp import StampJob

CONFIRMED = {CONFIRMED!r}
jobs, gap, warmup = int(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3])
keys = json.loads(sys.argv[4])
# BLPOP waits longer than redis-py's default socket timeout.
store = redis.Redis.from_url(os.environ["BENCH_RECORD_URL"], socket_timeout=120)
send = {{
    "stock Celery": lambda key: stamp.delay(key, time.time()),
    "generated": lambda key: StampJob.dispatch(key, time.time()),
}}
if sys.argv[5]:
    # Stock Celery waiting for RabbitMQ's confirmation of each publish, as the project does.
    from celery import Celery

    confirmed = Celery("stock", broker=os.environ["BENCH_BROKER_URL"])
    confirmed.conf.task_default_queue = sys.argv[5]
    confirmed.conf.broker_transport_options = {{"confirm_publish": True}}
    send[CONFIRMED] = lambda key: confirmed.send_task("stock.stamp", args=(key, time.time()))
seen = {{label: [] for label in send}}
order = list(send)
for number in range(warmup + jobs):
    # Rotate who goes first, so none always follows the same one's job.
    for label in order[number % len(order):] + order[:number % len(order)]:
        send[label](keys[label])
        got = store.blpop(keys[label], timeout=60 if number == 0 else 10)
        if got is None:
            raise SystemExit(f"{{label}}: job {{number}} did not start")
        if number >= warmup:
            seen[label].append(float(got[1]))
        time.sleep(gap)
print(json.dumps(seen))
"""


def worker(
    argv: list[str], cwd: Path, env: dict[str, str], scratch: Path, name: str
) -> subprocess.Popen[bytes]:
    pidfile = scratch / f"{name}.pid"
    log = (scratch / f"{name}.log").open("wb")
    return subprocess.Popen(
        [*argv, "--pidfile", str(pidfile)], cwd=cwd, env=env, stdout=log, stderr=subprocess.STDOUT
    )


@dataclass
class Side:
    """A generated project and a stock app side by side, on one broker, each on its own queue."""

    project: Path
    lib: Path
    namespace: str
    stock_queue: str
    env: dict[str, str]

    def forget(self, url: str) -> None:
        """Delete the queues and keys both left on the broker."""
        lanes = project_lanes(self.project, PACKAGE)
        forget_namespace(url, self.namespace, [self.stock_queue], lanes)


def side_by_side(name: str, url: str, record_url: str, scratch: Path) -> Side:
    """Render the project for broker `name` with the stamp job; the stock app is in scratch/lib."""
    project = render(scratch / f"project-{name}", PACKAGE, broker=name)
    (project / PACKAGE / "jobs" / "stamp.py").write_text(STAMP_JOB)
    lib = scratch / "lib"
    namespace = f"bench{uuid.uuid4().hex[:8]}"
    stock_queue = f"bench-stock-{uuid.uuid4().hex[:8]}"
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(project), str(lib)]),
        "BENCH_RECORD_URL": record_url,
        "BENCH_BROKER_URL": url,
        "BENCH_QUEUE": stock_queue,
        "BROKER_URL": url,
        "QUEUE_NAMESPACE": namespace,
    }
    return Side(project, lib, namespace, stock_queue, env)


def measure(
    name: str, url: str, record_url: str, scratch: Path, options: argparse.Namespace
) -> dict[str, list[float]]:
    """The workers up, the jobs sent; the latencies of each worker, in seconds."""
    python = sys.executable
    side = side_by_side(name, url, record_url, scratch)
    project, lib, env = side.project, side.lib, side.env
    # On RabbitMQ the project waits for the broker to confirm each publish:
    # stock Celery doing the same prices that guarantee.
    confirmed_queue = f"bench-stock-{uuid.uuid4().hex[:8]}" if name == "rabbitmq" else ""
    labels = ["stock Celery", "generated", *([CONFIRMED] if confirmed_queue else [])]
    keys = {label: f"bench-latency-{uuid.uuid4().hex[:8]}" for label in labels}
    concurrency = ["--concurrency", str(options.concurrency)]
    stock_worker = [python, "-m", "celery", "-A", "stock_app", "worker", "--without-mingle",
                    "--without-gossip", *concurrency]  # fmt: skip
    # Each its own node name: two workers named alike share (and lock) a control queue.
    stocks = [worker([*stock_worker, "--hostname", "stock@%h"], lib, env, scratch, "stock")]
    if confirmed_queue:
        confirmed_env = {**env, "BENCH_QUEUE": confirmed_queue}
        confirmed_worker = [*stock_worker, "--hostname", "confirmed@%h"]
        stocks.append(worker(confirmed_worker, lib, confirmed_env, scratch, "confirmed"))
    generated = worker(
        [python, "-m", PACKAGE, "queue", "work", "--queue", "default", *concurrency],
        project, env, scratch, f"generated-{name}",
    )  # fmt: skip
    try:
        done = subprocess.run(
            [python, "-c", PRODUCER, str(options.jobs), str(options.gap), str(WARMUP),
             json.dumps(keys), confirmed_queue],
            cwd=lib, env=env, capture_output=True, text=True, timeout=600,
        )  # fmt: skip
        if done.returncode:
            raise SystemExit(f"{name}: the producer failed:\n{done.stderr[-3000:]}")
        return json.loads(done.stdout)
    finally:
        for each in (*stocks, generated):
            stop(each)
        side.forget(url)
        if confirmed_queue:
            forget_namespace(url, confirmed_queue, [confirmed_queue])
        forget_namespace(record_url, "bench-latency", list(keys.values()))


def report(name: str, seen: dict[str, list[float]]) -> None:
    points = (50, 90, 99, 100)
    figures = {
        label: [percentile(values, point) * 1000 for point in points]
        for label, values in seen.items()
    }
    base = figures["stock Celery"]
    for label, values in figures.items():
        cells = "  ".join(
            f"{'max' if point == 100 else f'p{point}'} {value:6.2f} ms"
            for point, value in zip(points, values, strict=True)
        )
        ratio = "  ".join(f"{value / ref:4.2f}x" for value, ref in zip(values, base, strict=True))
        print(f"{name:<9} {label:<15} {cells}   x stock: {ratio}")


def main() -> None:
    parser = worker_bench_options(
        __doc__.split("\n\n")[0],
        "Redis where the jobs push their latencies (keys unique to the run)",
    )
    parser.add_argument("--jobs", type=int, default=1000, help="jobs per worker, after warm-up")
    parser.add_argument("--gap", type=float, default=0.02, help="idle seconds between jobs")
    options = parser.parse_args()
    header = (
        f"{options.jobs} jobs per worker, one at a time, {options.gap * 1000:.0f} ms idle "
        f"between jobs, concurrency {options.concurrency}, prefork pool; "
        "dispatch-to-start latency:"
    )
    run_on_brokers(options, "workergen-latency-", header, measure, report)


if __name__ == "__main__":
    main()
