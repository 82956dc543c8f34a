"""Recovery on restart (Redis): a worker SIGKILLed whole with jobs held, restarted at once.

    python bench/recovery.py [--jobs 500] [--kill-after 100] [--seconds 0.02]
                             [--concurrency 2] [--repeat 3] [--bound 30]

For each contender, in rounds (`--repeat`): queue `--jobs` jobs that sleep `--seconds`
each, start a worker (its own process group, as a supervisor starts it), SIGKILL that
group once `--kill-after` jobs are done, and start the same worker again at once. The
jobs the dead worker held (running or reserved, not acknowledged) are the ones found
neither done nor queued at the kill, and recorded as unacknowledged; one taken off the
queue and not yet recorded (kombu's window of one Redis round trip, on both contenders)
is counted as lost, and nothing can give it back. Printed per round, from the restart (the new
worker's process started) and from its "ready" line: when every held job is done, and
when every job is done. A figure not reached within `--bound` seconds of the restart is
printed as "not recovered within N s" (then the held jobs stay stuck until the
visibility timeout, 3600 s on both).

Contenders: the generated project (`queue work --queue default`, default settings:
late acknowledgement, WORKER_HEARTBEAT_TTL=15); the same with each worker in a new
PID namespace (`unshare`, as a container restarts: the new worker cannot check the old
one's processes, so the jobs wait for its heartbeat; left out where `unshare` cannot
run); and stock Celery with `task_acks_late`
and `task_reject_on_worker_lost` (kombu's Redis transport, visibility timeout 3600 s),
both with prefetch 4 per process. Every key and queue used is unique to the run and
deleted afterwards; workers are stopped by their PID (the killed ones by their group).

BROKER: WORKERGEN_BENCH_REDIS_URL (default redis://127.0.0.1:6379/0).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import redis
from running import forget_namespace, render_project, stop

URL = os.environ.get("WORKERGEN_BENCH_REDIS_URL", "redis://127.0.0.1:6379/0")
# Each worker in a PID namespace of its own (needs root or user namespaces).
NEW_PID_NAMESPACE = ["unshare", "--pid", "--fork", "--mount-proc", "--kill-child=SIGTERM"]
PACKAGE = "benchrec"
JOB = f'''"""Sleeps, then records when it was done (the recovery benchmark)."""

import os
import time

import redis
from celery import current_task

from workergen_runtime import job

_done = redis.Redis.from_url(os.environ["BENCH_DONE_URL"])


@job(name="{PACKAGE}.sleepy", queue="default")
def sleepy(seconds: float) -> None:
    time.sleep(seconds)
    _done.hset(os.environ["BENCH_DONE_KEY"], current_task.request.id, time.time())
'''
STOCK_APP = """\
import os
import time

import redis
from celery import Celery, current_task

queue = os.environ["BENCH_QUEUE"]
app = Celery("stock", broker=os.environ["BENCH_DONE_URL"])
app.conf.task_default_queue = queue
app.conf.task_acks_late = True
app.conf.task_reject_on_worker_lost = True
# Key names only, so the run deletes what it made; the visibility timeout stays kombu's.
app.conf.broker_transport_options = {
    "unacked_key": f"{queue}.unacked",
    "unacked_index_key": f"{queue}.unacked_index",
    "unacked_mutex_key": f"{queue}.unacked_mutex",
}
app.conf.control_exchange = f"{queue}.control"
app.conf.event_exchange = f"{queue}.events"
_done = redis.Redis.from_url(os.environ["BENCH_DONE_URL"])


@app.task(name="stock.sleepy")
def sleepy(seconds):
    time.sleep(seconds)
    _done.hset(os.environ["BENCH_DONE_KEY"], current_task.request.id, time.time())
"""
GENERATED_FILL = f"""\
import os, sys
import {PACKAGE}
from workergen_runtime.celery_app import app
from workergen_runtime.discovery import import_jobs
import_jobs()
task = app.tasks["{PACKAGE}.sleepy"]
for i in range(int(sys.argv[1])):
    task.dispatch_with(args=[float(sys.argv[2])], task_id=f"{{sys.argv[3]}}-{{i}}")
"""
STOCK_FILL = """\
import sys
from stock_app import sleepy
for i in range(int(sys.argv[1])):
    sleepy.apply_async(args=[float(sys.argv[2])], task_id=f"{sys.argv[3]}-{i}")
"""


@dataclass
class Contender:
    label: str
    cwd: Path
    queue: str  # the Redis list the jobs wait in
    unacked: str  # the hash of messages delivered and not acknowledged
    prefix: str  # every key of the run starts with it
    fill: list[str]
    work: list[str]
    env: dict[str, str]


@dataclass
class Round:
    held: int
    # Taken off the queue by the killed worker, not yet recorded as unacknowledged:
    # kombu's window of one round trip, on both; nothing can give these back.
    lost: int
    held_done: float | None  # seconds after the restart; None: not within the bound
    all_done: float | None
    ready: float  # when the new worker said it was ready, after the restart


def contenders(scratch: Path, concurrency: int) -> list[Contender]:
    python = sys.executable
    project = render_project(scratch / PACKAGE, PACKAGE, broker="redis", result_backend="none")
    (project / PACKAGE / "jobs" / "sleepy.py").write_text(JOB)
    stock_dir = scratch / "stock"
    stock_dir.mkdir()
    (stock_dir / "stock_app.py").write_text(STOCK_APP)
    ns = f"benchrec{uuid.uuid4().hex[:8]}"
    stock_queue = f"bench-recovery-stock-{uuid.uuid4().hex[:8]}"
    common = {"BENCH_DONE_URL": URL}
    pool = ["--concurrency", str(concurrency)]
    quiet = ["--without-mingle", "--without-gossip", "--loglevel", "INFO"]  # as `queue work`
    generated = [python, "-m", PACKAGE, "queue", "work", "--queue", "default", *pool]
    entrants = [
        Contender(
            "generated",
            project,
            f"{ns}.default",
            f"{ns}.unacked",
            ns,
            [python, "-c", GENERATED_FILL],
            generated,
            {
                **common,
                "PYTHONPATH": str(project),
                "BROKER_URL": URL,
                "LOCK_URL": URL,
                "QUEUE_NAMESPACE": ns,
                "LOG_FORMAT": "text",
                "BENCH_DONE_KEY": f"{ns}.bench-done",
            },
        ),
        Contender(
            "stock Celery, acks_late",
            stock_dir,
            stock_queue,
            f"{stock_queue}.unacked",
            stock_queue,
            [python, "-c", STOCK_FILL],
            [python, "-m", "celery", "-A", "stock_app", "worker", "-Q", stock_queue, *pool, *quiet],
            {
                **common,
                "PYTHONPATH": str(stock_dir),
                "BENCH_QUEUE": stock_queue,
                "BENCH_DONE_KEY": f"{stock_queue}.bench-done",
            },
        ),
    ]
    if NEW_PID_NAMESPACE and usable(NEW_PID_NAMESPACE):
        # As a container restarts: the new worker cannot check the old one's processes.
        base = entrants[0]
        ns = f"benchrec{uuid.uuid4().hex[:8]}"
        env = {**base.env, "QUEUE_NAMESPACE": ns, "BENCH_DONE_KEY": f"{ns}.bench-done"}
        entrants.insert(
            1,
            Contender(
                "generated, new PID ns",
                project,
                f"{ns}.default",
                f"{ns}.unacked",
                ns,
                base.fill,
                [*NEW_PID_NAMESPACE, *generated],
                env,
            ),
        )
    return entrants


def usable(launcher: list[str]) -> bool:
    done = subprocess.run([*launcher, "true"], capture_output=True, check=False)
    if done.returncode:
        print(f"(no contender in a new PID namespace: {' '.join(launcher)} fails here)")
    return done.returncode == 0


def start(contender: Contender, log: Path) -> subprocess.Popen[bytes]:
    pidfile = log.with_suffix(".pid")
    with log.open("wb") as out:
        return subprocess.Popen(
            [*contender.work, "--pidfile", str(pidfile), "--hostname", f"{log.stem}@%h"],
            cwd=contender.cwd,
            env={**os.environ, **contender.env},
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group, as a supervisor starts it
        )


def queued_ids(client: redis.Redis, queue: str) -> set[bytes]:
    return {json.loads(item)["headers"]["id"].encode() for item in client.lrange(queue, 0, -1)}


def unacked_ids(client: redis.Redis, unacked: str) -> set[bytes]:
    found = client.hvals(unacked)
    return {json.loads(item)[0]["headers"]["id"].encode() for item in found}


def wait_ready(worker: subprocess.Popen[bytes], log: Path, deadline: float) -> float:
    while time.monotonic() < deadline:
        if "ready." in log.read_text(errors="replace"):
            return time.monotonic()
        if worker.poll() is not None:
            raise SystemExit(f"worker exited early:\n{log.read_text(errors='replace')[-3000:]}")
        time.sleep(0.02)
    raise SystemExit(f"worker not ready:\n{log.read_text(errors='replace')[-3000:]}")


def one_round(
    contender: Contender, args: argparse.Namespace, scratch: Path, client: redis.Redis
) -> Round:
    done_key = contender.env["BENCH_DONE_KEY"]
    tag = uuid.uuid4().hex[:8]
    env = {**os.environ, **contender.env}
    subprocess.run(
        [*contender.fill, str(args.jobs), str(args.seconds), tag],
        cwd=contender.cwd,
        env=env,
        check=True,
        timeout=300,
    )
    first = start(contender, scratch / f"first-{tag}.log")
    try:
        deadline = time.monotonic() + 120
        while client.hlen(done_key) < args.kill_after:
            if time.monotonic() > deadline or first.poll() is not None:
                raise SystemExit(f"{contender.label}: the first worker did not get going")
            time.sleep(0.01)
    finally:
        pid = first.pid
        assert os.getpgid(pid) == pid, "only the group our worker leads is killed"
        os.killpg(pid, signal.SIGKILL)
        first.wait(10)
    every = {f"{tag}-{i}".encode() for i in range(args.jobs)}
    taken = every - set(client.hkeys(done_key)) - queued_ids(client, contender.queue)
    held = taken & unacked_ids(client, contender.unacked)
    expected = every - (taken - held)
    restart = time.monotonic()
    log = scratch / f"second-{tag}.log"
    second = start(contender, log)
    try:
        bound = restart + args.bound
        ready = wait_ready(second, log, bound + 60) - restart
        held_done = all_done = None
        while time.monotonic() < bound and all_done is None:
            done = set(client.hkeys(done_key))
            now = time.monotonic() - restart
            if held_done is None and held <= done:
                held_done = now
            if expected <= done:
                all_done = now
            time.sleep(0.02)
        return Round(len(held), len(taken - held), held_done, all_done, ready)
    finally:
        stop(second)
        client.delete(done_key)


def figure(value: float | None, bound: float, missing: str = "not recovered") -> str:
    return f"{value:.2f} s" if value is not None else f"{missing} within {bound:g} s"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=500)
    parser.add_argument("--kill-after", type=int, default=100, help="jobs done before the kill")
    parser.add_argument("--seconds", type=float, default=0.02, help="each job's sleep")
    parser.add_argument("--concurrency", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--bound", type=float, default=30, help="seconds waited after restart")
    parser.add_argument("--only", default="", help="only contenders whose label has this")
    args = parser.parse_args()
    if not 0 < args.kill_after < args.jobs:
        parser.error("--kill-after must be between 0 and --jobs")
    client = redis.Redis.from_url(URL)
    client.ping()
    load = os.getloadavg()
    print(
        f"{platform.node()}: {os.cpu_count()} CPUs, load {load[0]:.2f}, Redis "
        f"{client.info()['redis_version']}, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}"
    )
    print(
        f"{args.jobs} jobs of {args.seconds:g} s, worker SIGKILLed (whole group) after "
        f"{args.kill_after} done, restarted at once; concurrency {args.concurrency}, "
        f"prefetch 4; times from the restart"
    )
    with tempfile.TemporaryDirectory(prefix="bench-recovery-") as tmp:
        scratch = Path(tmp)
        entrants = [c for c in contenders(scratch, args.concurrency) if args.only in c.label]
        rounds: dict[str, list[Round]] = {c.label: [] for c in entrants}
        try:
            for number in range(1, args.repeat + 1):
                for contender in entrants:
                    result = one_round(contender, args, scratch, client)
                    rounds[contender.label].append(result)
                    print(
                        f"  round {number} {contender.label:<24} held {result.held:>2} "
                        f"(lost in kombu's window: {result.lost})  "
                        f"ready {result.ready:.2f} s  held jobs done "
                        f"{figure(result.held_done, args.bound)}  all done "
                        f"{figure(result.all_done, args.bound, 'not all')}",
                        flush=True,
                    )
        finally:
            for contender in entrants:
                forget_namespace(URL, contender.prefix, [])
    print("medians (seconds after the restart):")
    for label, results in rounds.items():
        recovered = [r.held_done for r in results if r.held_done is not None]
        finished = [r.all_done for r in results if r.all_done is not None]
        held = statistics.median(r.held_done or 0 for r in results) if recovered else None
        line = f"  {label:<24} held jobs done: "
        if len(recovered) == len(results):
            after_ready = statistics.median((r.held_done or 0) - r.ready for r in results)
            line += f"{held:.2f} s ({after_ready:.2f} s after ready)"
        else:
            line += (
                f"not recovered within {args.bound:g} s in {len(results) - len(recovered)} of "
                f"{len(results)} rounds (stuck until the visibility timeout, 3600 s)"
            )
        if len(finished) == len(results):
            line += f"; all done: {statistics.median(finished):.2f} s"
        ready = statistics.median(r.ready for r in results)
        lost = sum(r.lost for r in results)
        print(f"{line}; ready after {ready:.2f} s; lost in kombu's window: {lost}")


if __name__ == "__main__":
    main()
