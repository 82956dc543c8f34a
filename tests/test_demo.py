"""README's first command, scripts/demo.sh, as a user runs it: with and without Redis.

The demo runs in the environment of this suite (nothing is installed; the
project gets workergen-runtime from this checkout, installed editable), in a
folder of the test's own and with a namespace of its own, so concurrent runs
never meet.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from support.brokers import REDIS_URL, require_broker
from support.projects import unique_namespace

REPO_ROOT = Path(__file__).resolve().parents[1]
RUNTIME = REPO_ROOT / "runtime"
# The demo looks for Redis on this machine's standard port.
DEMO_REDIS = "redis://127.0.0.1:6379"
# The suite's database (the demo refuses 0 and 1), so the session's clean-up
# also sees what a failed run leaves.
SUITE_DB = int(urlsplit(REDIS_URL).path.strip("/") or 0)
DEMO_DB = SUITE_DB if 2 <= SUITE_DB <= 15 else 13
# kombu's table of when each fanout binding expires, shared by every namespace.
DEADLINES = "_kombu.binding_deadlines"


def run_demo(folder: Path, namespace: str, **env: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        ["bash", str(REPO_ROOT / "scripts" / "demo.sh")],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=300,
        env={
            **os.environ,
            "WORKERGEN_VENV": sys.prefix,
            "WORKERGEN_SKIP_INSTALL": "1",
            "DEMO_DIR": str(folder / "demo-run"),
            "DEMO_NAMESPACE": namespace,
            **env,
        },
    )
    assert "installing" not in done.stdout, done.stdout
    return done


def hello_ran(done: subprocess.CompletedProcess[str]) -> None:
    """The project ran on this checkout's runtime, and the worker's log line of the
    dispatched hello job is shown, with the job's id."""
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    runtime = rf"^==> workergen-runtime \S+ from {re.escape(str(RUNTIME))} \(this checkout\)$"
    assert re.search(runtime, done.stdout, re.MULTILINE), output
    dispatched = re.search(r"^dispatched demo\.hello id=(\S+)$", done.stdout, re.MULTILINE)
    assert dispatched, output
    assert re.search(
        rf"^    worker log: .*\[demo\.hello {dispatched[1]}\] Hello, workergen!$",
        done.stdout,
        re.MULTILINE,
    ), output


def test_without_redis_the_demo_runs_hello_on_a_folder_broker(tmp_path: Path) -> None:
    done = run_demo(tmp_path, unique_namespace("demo"), DEMO_BROKER="filesystem")

    hello_ran(done)
    assert "==> broker: a folder" in done.stdout
    assert "no result backend" in done.stdout
    assert "DEVELOPMENT ONLY" in done.stdout


def test_with_redis_the_demo_uses_its_own_database_and_leaves_no_key(tmp_path: Path) -> None:
    import redis

    url = require_broker("redis", f"{DEMO_REDIS}/{DEMO_DB}")
    namespace = unique_namespace("demo")
    done = run_demo(tmp_path, namespace, DEMO_REDIS_DB=str(DEMO_DB))

    hello_ran(done)
    assert f"Redis at 127.0.0.1:6379, database {DEMO_DB}" in done.stdout
    assert 'result "Hello, workergen!"' in done.stdout
    deleted = re.search(r"deleted the demo's (\d+) Redis keys .* (\d+) left$", done.stdout, re.M)
    assert deleted, done.stdout
    assert int(deleted[1]) > 0 and deleted[2] == "0", done.stdout
    task_id = re.search(r"^dispatched demo\.hello id=(\S+)$", done.stdout, re.M)[1]

    def of_the_demo(name: bytes) -> bool:
        text = name.decode("utf-8", "replace")
        return namespace in text or task_id in text

    # Nothing in the database it used, nor in the databases 0 and 1 of other programs.
    left = {}
    for db in sorted({DEMO_DB, 0, 1}):
        client = redis.Redis.from_url(f"{DEMO_REDIS}/{db}", socket_timeout=10)
        keys = [key for key in client.scan_iter(count=1000) if of_the_demo(key)]
        deadlines = [m for m in client.zrange(DEADLINES, 0, -1) if of_the_demo(m)]
        # What a failed clean-up leaves goes now: the job's result holds no namespace.
        if keys:
            client.delete(*keys)
        if deadlines:
            client.zrem(DEADLINES, *deadlines)
        if keys or deadlines:
            left[db] = [*keys, *deadlines]
    assert left == {}, f"the demo left these in Redis at {url}: {left}"


@pytest.mark.parametrize("db", ["0", "1", "16", "x"])
def test_the_demo_refuses_a_database_of_other_programs(tmp_path: Path, db: str) -> None:
    done = run_demo(tmp_path, unique_namespace("demo"), DEMO_REDIS_DB=db)

    assert done.returncode == 2, done.stdout + done.stderr
    assert f"DEMO_REDIS_DB={db}" in done.stderr
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "demo-run").exists()


def test_the_demo_refuses_a_runtime_that_is_not_the_checkout_s(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    shutil.copytree(
        RUNTIME / "src" / "workergen_runtime",
        elsewhere / "workergen_runtime",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    done = run_demo(tmp_path, unique_namespace("demo"), PYTHONPATH=str(elsewhere))

    assert done.returncode == 1, done.stdout + done.stderr
    assert f"imports workergen-runtime from {elsewhere / 'workergen_runtime'}" in done.stderr
    assert f"pip install -e {RUNTIME}" in done.stderr
    assert "workergen new" not in done.stdout
