"""Latency of the HTTP front door's 202 against a bare FastAPI endpoint, same server, same run.

    python bench/http_api.py [--requests 2000] [--warmup 200] [--repeat 3]

It renders a Redis project with `http_api` from this checkout, adds a job that
does nothing, and starts on loopback: a worker of the project consuming the
default lane (so the broker is busy while the API answers), the project's
`http serve`, and a bare FastAPI app whose POST does nothing, under the same
uvicorn settings (one process, no access log, the project's logging left alone).

One client with a kept-alive connection per server sends requests one after
another, alternating servers request by request, so a slow spell on a shared
machine hits both. Three contenders:

- bare: `POST /noop` on the bare app, answering 202 with a small JSON body;
- job: `POST /jobs/noop` on the project (validation, dispatch to Redis, 202);
- job+key: the same with a fresh `Idempotency-Key` per request (one more Redis
  round trip, SET NX).

It prints p50 and p99 per contender and round, the medians over the rounds,
and the ratios to bare. Processes are stopped by their PID; the namespace used
is unique to the run and its keys are deleted afterwards.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from running import render_project as render
from running import stop

REDIS_URL = os.environ.get("WORKERGEN_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
PACKAGE = "benchhttp"
WORKER_OPTIONS = ["--concurrency", "1"]

NOOP_JOB = f'''"""A job that does nothing, for the HTTP benchmark."""

from workergen_runtime import job


@job(name="{PACKAGE}.noop", queue="default")
def noop() -> None:
    return None
'''

BARE_APP = """\
import uvicorn
from fastapi import FastAPI
from fastapi.responses import JSONResponse

app = FastAPI()


@app.post("/noop", status_code=202)
def noop() -> JSONResponse:
    return JSONResponse({"id": "0", "job": "noop", "status_url": "/jobs/0"}, status_code=202)


if __name__ == "__main__":
    import sys

    # The settings `http serve` uses.
    uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), workers=1, log_config=None,
                access_log=False)
"""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def render_project(dest: Path) -> Path:
    render(dest, PACKAGE, broker="redis", http_api="true")
    (dest / PACKAGE / "jobs" / "noop.py").write_text(NOOP_JOB)
    return dest


def wait_until_up(url: str, process: subprocess.Popen[bytes], log: Path) -> None:
    import httpx

    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"server exited:\n{log.read_text()}")
        try:
            httpx.get(url, timeout=1)
            return
        except httpx.HTTPError:
            time.sleep(0.2)
    raise SystemExit(f"server not up in 60 s:\n{log.read_text()}")


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


def one_round(urls: dict[str, str], requests: int, warmup: int) -> dict[str, list[float]]:
    """Latencies in ms per contender, requests interleaved across contenders."""
    import httpx

    clients = {name: httpx.Client(timeout=30) for name in urls}
    timings: dict[str, list[float]] = {name: [] for name in urls}
    try:
        for i in range(warmup + requests):
            for name, url in urls.items():
                headers = {"Content-Type": "application/json"}
                if name == "job+key":
                    headers["Idempotency-Key"] = uuid.uuid4().hex
                started = time.perf_counter()
                answer = clients[name].post(url, content=b"{}", headers=headers)
                elapsed = (time.perf_counter() - started) * 1000
                if answer.status_code != 202:
                    raise SystemExit(f"{name}: HTTP {answer.status_code} {answer.text}")
                if i >= warmup:
                    timings[name].append(elapsed)
    finally:
        for client in clients.values():
            client.close()
    return timings


def main() -> None:
    # This script is named http.py: its folder must not shadow the standard `http` package.
    here = Path(__file__).resolve().parent
    sys.path[:] = [entry for entry in sys.path if Path(entry or ".").resolve() != here]
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--warmup", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=3)
    options = parser.parse_args()

    import redis

    namespace = f"benchhttp{uuid.uuid4().hex[:8]}"
    scratch = Path(tempfile.mkdtemp(prefix="bench-http-"))
    project = render_project(scratch / PACKAGE)
    (scratch / "bare_app.py").write_text(BARE_APP)
    env = {
        **os.environ,
        "PYTHONPATH": str(project),
        "BROKER_URL": REDIS_URL,
        "QUEUE_NAMESPACE": namespace,
        "LOG_LEVEL": "WARNING",
    }
    api_port, bare_port = free_port(), free_port()
    processes: list[subprocess.Popen[bytes]] = []

    def start(args: list[str], cwd: Path, name: str) -> tuple[subprocess.Popen[bytes], Path]:
        log = scratch / f"{name}.log"
        with log.open("wb") as out:
            process = subprocess.Popen(args, cwd=cwd, env=env, stdout=out, stderr=out)
        processes.append(process)
        return process, log

    try:
        worker, _ = start(
            # One busy worker process on the lane the API fills.
            [sys.executable, "-m", PACKAGE, "queue", "work", "-Q", "default", *WORKER_OPTIONS],
            project,
            "worker",
        )
        api, api_log = start(
            [sys.executable, "-m", PACKAGE, "http", "serve", "--port", str(api_port)],
            project,
            "api",
        )
        bare, bare_log = start([sys.executable, "bare_app.py", str(bare_port)], scratch, "bare")
        wait_until_up(f"http://127.0.0.1:{api_port}/healthz", api, api_log)
        wait_until_up(f"http://127.0.0.1:{bare_port}/docs", bare, bare_log)
        urls = {
            "bare": f"http://127.0.0.1:{bare_port}/noop",
            "job": f"http://127.0.0.1:{api_port}/jobs/noop",
            "job+key": f"http://127.0.0.1:{api_port}/jobs/noop",
        }
        print(
            f"{options.requests} requests per contender and round, after {options.warmup} "
            f"warm-up; {options.repeat} round(s); a worker consuming the default lane"
        )
        rounds: dict[str, list[tuple[float, float]]] = {name: [] for name in urls}
        for number in range(1, options.repeat + 1):
            timings = one_round(urls, options.requests, options.warmup)
            for name, values in timings.items():
                p50, p99 = percentile(values, 0.5), percentile(values, 0.99)
                rounds[name].append((p50, p99))
                print(f"  round {number}  {name:<8} p50 {p50:6.2f} ms  p99 {p99:6.2f} ms")
        medians = {
            name: (
                statistics.median(p50 for p50, _ in values),
                statistics.median(p99 for _, p99 in values),
            )
            for name, values in rounds.items()
        }
        bare_p50, bare_p99 = medians["bare"]
        print("median over the rounds:")
        for name, (p50, p99) in medians.items():
            print(
                f"  {name:<8} p50 {p50:6.2f} ms  p99 {p99:6.2f} ms  "
                f"ratio to bare: p50 {p50 / bare_p50:4.2f}x  p99 {p99 / bare_p99:4.2f}x"
            )
        goal = "met" if medians["job"][1] < 10 and medians["job+key"][1] < 10 else "NOT met"
        print(f"goal p99 < 10 ms: {goal}")
        if worker.poll() is not None:
            print("warning: the worker exited during the run", file=sys.stderr)
    finally:
        for process in reversed(processes):
            stop(process)
        client = redis.Redis.from_url(REDIS_URL)
        for key in client.scan_iter(f"{namespace}*"):
            client.delete(key)


if __name__ == "__main__":
    main()
