"""Every `--pool` that `queue work --help` offers starts a worker that runs jobs, or is
refused in a few lines that say what to install."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from support.brokers import IN_CI
from support.projects import Project, redis_project, wait_for_files

REPO_ROOT = Path(__file__).resolve().parents[1]

PACKAGE = "billing"

# Waits on a socket that never answers: I/O, not CPU. Each run notes when it began and ended.
IO_JOB = '''"""A job that waits on the network, as most I/O-bound jobs do."""

import socket
import time
from pathlib import Path

from workergen_runtime import job


@job(name="billing.waits_on_io")
def waits_on_io(folder: str, token: str, seconds: float) -> str:
    began = time.time()
    quiet, _other_end = socket.socketpair()
    quiet.settimeout(seconds)
    try:
        quiet.recv(1)
    except TimeoutError:
        pass
    Path(folder, token).write_text(f"{began} {time.time()}")
    return token
'''


def offered_pools(project: Path) -> list[str]:
    """The pools `queue work --help` names."""
    done = subprocess.run(
        [sys.executable, "-m", PACKAGE, "queue", "work", "--help"],
        cwd=project,
        env={"PATH": "/usr/bin:/bin", "COLUMNS": "200", "PYTHONPATH": str(project)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    text = " ".join(done.stdout.split())
    match = re.search(r"--pool \S+ ([a-z, ]+?) or ([a-z]+) ", text)
    assert match, text
    return [*match.group(1).split(", "), match.group(2)]


def require_gevent() -> None:
    if importlib.util.find_spec("gevent") is None:
        reason = "gevent is not installed; pip install -e '.[dev]'"
        if IN_CI:
            pytest.fail(f"CI=true requires gevent: {reason}", pytrace=False)
        pytest.skip(reason)


@pytest.fixture
def project(render, redis_url: str, tmp_path: Path) -> Project:
    proj = redis_project(render, redis_url, tmp_path, "pool")
    proj.add_probe_job()
    return proj


def test_help_offers_the_pools_the_worker_knows(render) -> None:
    assert offered_pools(render(broker="redis")) == ["prefork", "solo", "threads", "gevent"]


@pytest.mark.broker
@pytest.mark.e2e
@pytest.mark.parametrize(("pool", "banner"), [("solo", "solo"), ("threads", "thread")])
def test_a_worker_on_a_pool_without_extras_runs_a_job(
    project: Project, folder: Path, pool: str, banner: str
) -> None:
    with project.worker("--queue", "default", "--pool", pool, "--concurrency", "2") as worker:
        project.dispatch_probes(folder, [f"on-{pool}"])
        wait_for_files(folder, [f"on-{pool}"])
    assert f"concurrency: 2 ({banner})" in worker.log()


@pytest.mark.broker
@pytest.mark.e2e
def test_a_gevent_worker_runs_io_bound_jobs_side_by_side(project: Project, folder: Path) -> None:
    require_gevent()
    (project.root / PACKAGE / "jobs" / "waits_on_io.py").write_text(IO_JOB)
    tokens = [f"io-{i}" for i in range(8)]
    with project.worker("--queue", "default", "--pool", "gevent", "--concurrency", "8") as worker:
        sent = project.python(
            f"from {PACKAGE}.jobs.waits_on_io import waits_on_io\n"
            f"for token in {tokens!r}:\n"
            f"    waits_on_io.dispatch({str(folder)!r}, token, 3.0)\n"
        )
        assert sent.returncode == 0, sent.stderr
        runs = wait_for_files(folder, tokens, timeout=60)
    assert "concurrency: 8 (gevent)" in worker.log()
    spans = [tuple(map(float, text.split())) for text in runs.values()]
    # One after another they would take 24 s; on greenlets each began before any ended,
    # which only happens when a job's wait on the socket lets the others run.
    assert max(began for began, _ in spans) < min(ended for _, ended in spans), spans


def test_the_gevent_pool_without_gevent_is_refused_naming_the_extra(render, tmp_path: Path) -> None:
    rendered = render(broker="redis")
    # A module named gevent that cannot be imported stands for gevent not installed.
    shim = tmp_path / "shim"
    shim.mkdir()
    (shim / "gevent.py").write_text("raise ImportError(\"No module named 'gevent'\")\n")
    done = subprocess.run(
        [sys.executable, "-m", PACKAGE, "queue", "work", "--pool", "gevent"],
        cwd=rendered,
        env={
            "PATH": "/usr/bin:/bin",
            "PYTHONPATH": f"{shim}:{rendered}",
            "BROKER_URL": "memory://",
        },
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) <= 3, done.stderr
    assert "No module named 'gevent'" in done.stderr
    assert "pip install 'billing[gevent]'" in done.stderr
    # The extra it names exists and installs gevent (through the runtime's own extra).
    pyproject = tomllib.loads((rendered / "pyproject.toml").read_text())
    assert pyproject["project"]["optional-dependencies"]["gevent"] == ["workergen-runtime[gevent]"]
    runtime = tomllib.loads((REPO_ROOT / "runtime" / "pyproject.toml").read_text())
    extra = runtime["project"]["optional-dependencies"]["gevent"]
    assert [line for line in extra if line.startswith("gevent")], extra
