"""What the benchmarks share: a project rendered from this checkout, processes stopped by PID."""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple
from urllib.parse import urlsplit

REPO = Path(__file__).resolve().parents[1]
# Loopback brokers only; the variables point the benches at others on this host.
BROKERS = {
    "redis": os.environ.get("WORKERGEN_TEST_REDIS_URL", "redis://127.0.0.1:6379/0"),
    "rabbitmq": os.environ.get(
        "WORKERGEN_TEST_RABBITMQ_URL", "amqp://guest:guest@127.0.0.1:5672//"
    ),
}

STOCK_APP = """\
import json
import os

from celery import Celery

from bench_record import record

app = Celery("stock", broker=os.environ["BENCH_BROKER_URL"])
app.conf.task_default_queue = os.environ["BENCH_QUEUE"]
# Variants change one library setting at a time (JSON), to price each guarantee.
app.conf.update(json.loads(os.environ.get("BENCH_CONF", "{}")))


@app.task(name="stock.noop")
def noop():
    return None


@app.task(name="stock.stamp")
def stamp(key, sent):
    record(key, sent)
"""

# What a job's first line calls in both apps: how long after `sent` it started.
RECORDER = """\
import os
import time

import redis

_store = []


def record(key, sent):
    started = time.time()
    if not _store:
        _store.append(redis.Redis.from_url(os.environ["BENCH_RECORD_URL"]))
    _store[0].rpush(key, repr(started - sent))
"""


def write_stock_app(folder: Path) -> None:
    """The stock Celery app (`stock_app.py`) and the recorder its jobs use, in `folder`."""
    (folder / "stock_app.py").write_text(STOCK_APP)
    (folder / "bench_record.py").write_text(RECORDER)


def render_project(dest: Path, package: str, **answers: str) -> Path:
    """A project generated from the working tree's template with these answers."""
    data = [arg for name, value in answers.items() for arg in ("--data", f"{name}={value}")]
    subprocess.run(
        [
            str(Path(sys.executable).parent / "copier"),
            "copy",
            "--trust",
            "--defaults",
            "--quiet",
            "--data",
            f"project_name={package}",
            *data,
            str(REPO),
            str(dest),
        ],
        check=True,
        capture_output=True,
    )
    return dest


def stop(process: subprocess.Popen[bytes]) -> None:
    """Warm shutdown by PID, then kill that PID if it does not stop."""
    if process.poll() is not None:
        return
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(30)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(10)


def delete_queue(url: str, queue: str) -> None:
    from kombu import Connection

    try:
        with Connection(url) as conn:
            conn.default_channel.queue_delete(queue)
    except Exception as exc:
        print(f"  (could not delete queue {queue}: {exc})", file=sys.stderr)


def cpu_seconds(pid: int) -> tuple[float, float]:
    """(CPU of the process itself, CPU of its children that already exited), from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    utime, stime, cutime, cstime = (int(value) for value in fields[11:15])
    tick = os.sysconf("SC_CLK_TCK")
    return (utime + stime) / tick, (cutime + cstime) / tick


class WorkerCpu(NamedTuple):
    """CPU seconds of a worker so far, from /proc.

    `pool` is its live children that run the worker's own interpreter, the pool
    processes; `helpers` is every other child, running or ended: one-off work
    such as the generated RabbitMQ worker's `rabbitmqctl` policy check (and a
    pool process that ended, which a run shorter than WORKER_MAX_TASKS_PER_CHILD
    does not meet).
    """

    main: float
    pool: float
    helpers: float


def worker_cpu(pid: int) -> WorkerCpu | None:
    """The CPU a worker used so far (WorkerCpu); None without /proc."""
    try:
        own, helpers = cpu_seconds(pid)
        interpreter = os.readlink(f"/proc/{pid}/exe")
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        pool = 0.0
        for child in children:
            try:
                used = sum(cpu_seconds(int(child)))
                pooled = os.readlink(f"/proc/{child}/exe") == interpreter
            except (FileNotFoundError, ProcessLookupError):
                continue  # ended since the listing; counted next time with the ended ones
            if pooled:
                pool += used
            else:
                helpers += used
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    return WorkerCpu(own, pool, helpers)


def port_open(url: str) -> bool:
    parts = urlsplit(url)
    try:
        with socket.create_connection((parts.hostname, parts.port), 1):
            return True
    except OSError:
        return False


def loopback_broker(name: str) -> str | None:
    """The URL of broker `name`, None (said) when it is not running; only loopback is used."""
    url = BROKERS[name]
    host = urlsplit(url).hostname or ""
    if host not in ("127.0.0.1", "localhost", "::1"):
        raise SystemExit(f"{name}: loopback brokers only, got {host}")
    if not port_open(url):
        print(f"{name}: not reachable at {host}; skipped")
        return None
    return url


def delete_exchanges(url: str, exchanges: list[str]) -> None:
    """RabbitMQ: delete these exchanges (deleting one that is not there is no error)."""
    from kombu import Connection

    try:
        with Connection(url) as conn:
            for exchange in exchanges:
                conn.default_channel.exchange_delete(exchange)
    except Exception as exc:
        print(f"  (could not delete exchanges {exchanges}: {exc})", file=sys.stderr)


# The sorted set where kombu's Redis transport keeps its fanout bindings' expiry.
FANOUT_DEADLINES = "_kombu.binding_deadlines"


def forget_namespace(
    url: str, namespace: str, queues: list[str], lanes: tuple[str, ...] = ()
) -> None:
    """Delete what a run left on a broker.

    On Redis, the keys and fanout bindings naming `namespace` or `queues`; on
    RabbitMQ the queues and their exchanges, and a generated project's lanes, dead
    letters, control and event exchanges and policies.
    """
    if url.startswith("redis"):
        import redis

        client = redis.Redis.from_url(url)
        try:
            for name in (namespace, *queues):
                keys = list(client.scan_iter(match=f"*{name}*", count=1000))
                if keys:
                    client.delete(*keys)
                # kombu keeps when each fanout binding (a worker's pidbox) expires in one set.
                for member, _ in client.zscan_iter(FANOUT_DEADLINES, match=f"*{name}*"):
                    client.zrem(FANOUT_DEADLINES, member)
        finally:
            client.close()
        return
    for lane in lanes:
        queues = [*queues, f"{namespace}.{lane}", f"{namespace}.{lane}.dlq"]
    for queue in queues:
        delete_queue(url, queue)
    # Each queue's exchange of the same name, and a generated worker's control and
    # event exchanges (stock Celery's are its default names, shared with every app).
    control = [f"{namespace}.celery.pidbox", f"reply.{namespace}.celery.pidbox"]
    delete_exchanges(url, [*queues, *(control if lanes else []), f"{namespace}.celeryev"])
    ctl = shutil.which("rabbitmqctl")
    if lanes and ctl:  # the lanes' dead-letter policies, which the worker set
        for lane in lanes:
            policy = f"{namespace}.{lane}.dead-letters"
            subprocess.run(
                [ctl, "--quiet", "clear_policy", policy], capture_output=True, timeout=60
            )


def project_lanes(project: Path, package: str) -> tuple[str, ...]:
    """The lanes a rendered project was generated with (its project.py)."""
    import ast

    for line in (project / package / "project.py").read_text().splitlines():
        if line.startswith("LANES"):
            return tuple(ast.literal_eval(line.partition("=")[2].strip()))
    return ("default",)


def percentile(values: list[float], point: float) -> float:
    """The `point`-th percentile (nearest rank) of `values`; 100 is the maximum."""
    ordered = sorted(values)
    rank = max(1, -(-len(ordered) * point // 100))
    return ordered[int(rank) - 1]


def worker_bench_options(description: str, record_help: str) -> argparse.ArgumentParser:
    """The options every per-broker worker bench takes: --broker, --concurrency, --record-url."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--broker", choices=[*BROKERS, "all"], default="all")
    parser.add_argument("--concurrency", type=int, default=os.cpu_count() or 1)
    parser.add_argument(
        "--record-url",
        default=os.environ.get("BENCH_RECORD_URL", BROKERS["redis"]),
        help=record_help,
    )
    return parser


def run_on_brokers(
    options: argparse.Namespace,
    prefix: str,
    header: str,
    measure: Callable[[str, str, str, Path, argparse.Namespace], Any],
    report: Callable[[str, Any], None],
) -> None:
    """Measure and report each chosen broker that listens on loopback, beside a stock app."""
    brokers = list(BROKERS) if options.broker == "all" else [options.broker]
    scratch = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        lib = scratch / "lib"
        lib.mkdir()
        write_stock_app(lib)
        print(header)
        for name in brokers:
            url = loopback_broker(name)
            if url is not None:
                report(name, measure(name, url, options.record_url, scratch, options))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
