"""Worker start-up time and memory: stock Celery against a generated project.

    python bench/startup.py [--broker redis|rabbitmq|all] [--repeat 5] [--concurrency N]
                            [--record-url redis://127.0.0.1:6379/0]

For each broker (loopback only), in rounds, one job is queued and then a worker
is started: a stock Celery app (`celery worker --without-mingle
--without-gossip`, library defaults) or a project generated for that broker
(`queue work --queue default`). Start-up is the time from starting the process
to the job's first line (it reads the clock and pushes it to a Redis list,
`--record-url`): imports, configuration, connecting, the pool, the first
message. Printed, as medians: that time, the CPU seconds the worker's
processes used until then (steadier than the time on a loaded machine), and
one second later the memory of the main process and its pool processes summed:
RSS (pages shared after the fork counted in every process, as `ps` shows it)
and PSS (shared pages divided among their processes), from /proc.

Workers are started with --pidfile and stopped by their PID; the queues and
keys of the run are deleted afterwards.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import redis
from latency import PACKAGE, side_by_side
from running import (
    forget_namespace,
    run_on_brokers,
    stop,
    worker_bench_options,
    worker_cpu,
)

SETTLE = 1.0


@dataclass
class Start:
    seconds: float
    cpu: float
    rss_mb: float
    pss_mb: float


def memory_mb(pid: int) -> tuple[float, float]:
    """(RSS, PSS) in MB of a process and its children, from /proc."""
    pids = [pid, *map(int, Path(f"/proc/{pid}/task/{pid}/children").read_text().split())]
    rss = pss = 0
    for each in pids:
        try:
            for line in Path(f"/proc/{each}/smaps_rollup").read_text().splitlines():
                name, _, value = line.partition(":")
                if name in ("Rss", "Pss"):
                    kilobytes = int(value.split()[0])
                    rss += kilobytes if name == "Rss" else 0
                    pss += kilobytes if name == "Pss" else 0
        except FileNotFoundError:
            continue
    return rss / 1024, pss / 1024


def start_once(
    label: str,
    queue_job: list[str],
    work: list[str],
    cwd: Path,
    env: dict[str, str],
    store: redis.Redis,
    key: str,
    scratch: Path,
) -> Start:
    subprocess.run(queue_job, cwd=cwd, env=env, check=True, timeout=120)
    log = (scratch / f"{uuid.uuid4().hex[:8]}.log").open("wb")
    began = time.time()
    process = subprocess.Popen(
        [*work, "--pidfile", str(scratch / f"{uuid.uuid4().hex[:8]}.pid")],
        cwd=cwd,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        got = store.blpop([key], timeout=120)
        if got is None:
            tail = Path(log.name).read_text(errors="replace")[-2000:]
            raise SystemExit(f"{label}: the worker ran no job in 120 s:\n{tail}")
        seconds = float(got[1]) - began  # the job pushed its start time (sent = 0)
        cpu = worker_cpu(process.pid)
        time.sleep(SETTLE)
        rss, pss = memory_mb(process.pid)
        return Start(seconds, sum(cpu) if cpu else 0.0, rss, pss)
    finally:
        stop(process)
        log.close()


def measure(
    name: str, url: str, record_url: str, scratch: Path, options: argparse.Namespace
) -> dict[str, list[Start]]:
    python = sys.executable
    side = side_by_side(name, url, record_url, scratch)
    project, lib, env = side.project, side.lib, side.env
    key = f"bench-startup-{uuid.uuid4().hex[:8]}"
    concurrency = ["--concurrency", str(options.concurrency)]
    contenders = {
        "stock Celery": (
            [python, "-c", f"from stock_app import stamp; stamp.delay({key!r}, 0)"],
            [python, "-m", "celery", "-A", "stock_app", "worker", "--without-mingle",
             "--without-gossip", *concurrency],
            lib,
        ),
        "generated": (
            [python, "-c", f"from {PACKAGE}.jobs.stamp import StampJob; "
             f"StampJob.dispatch({key!r}, 0)"],
            [python, "-m", PACKAGE, "queue", "work", "--queue", "default", *concurrency],
            project,
        ),
    }  # fmt: skip
    store = redis.Redis.from_url(record_url, socket_timeout=180)  # BLPOP waits up to 120 s
    starts: dict[str, list[Start]] = {label: [] for label in contenders}
    try:
        for _ in range(options.repeat):
            for label, (queue_job, work, cwd) in contenders.items():
                starts[label].append(
                    start_once(label, queue_job, work, cwd, env, store, key, scratch)
                )
    finally:
        side.forget(url)
        forget_namespace(record_url, key, [])
        store.close()
    return starts


def report(name: str, starts: dict[str, list[Start]]) -> None:
    fields = ("seconds", "cpu", "rss_mb", "pss_mb")
    medians = {
        label: {f: statistics.median(getattr(s, f) for s in runs) for f in fields}
        for label, runs in starts.items()
    }
    base = medians["stock Celery"]
    for label, m in medians.items():
        spread = [s.seconds for s in starts[label]]
        print(
            f"{name:<9} {label:<13} start-up {m['seconds']:5.2f} s "
            f"({min(spread):.2f}-{max(spread):.2f}) {m['seconds'] / base['seconds']:4.2f}x"
            f"  cpu {m['cpu']:5.2f} s {m['cpu'] / base['cpu']:4.2f}x"
            f"  RSS {m['rss_mb']:5.1f} MB {m['rss_mb'] / base['rss_mb']:4.2f}x"
            f"  PSS {m['pss_mb']:5.1f} MB {m['pss_mb'] / base['pss_mb']:4.2f}x"
        )


def main() -> None:
    parser = worker_bench_options(
        __doc__.split("\n\n")[0],
        "Redis where the jobs push their start time (keys unique to the run)",
    )
    parser.add_argument("--repeat", type=int, default=5, help="starts of each worker")
    options = parser.parse_args()
    header = (
        f"{options.repeat} starts of each worker, concurrency {options.concurrency}, "
        "prefork pool; medians (min-max of the start-up time), ratio to stock Celery:"
    )
    run_on_brokers(options, "workergen-startup-", header, measure, report)


if __name__ == "__main__":
    main()
