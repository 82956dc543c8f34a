"""A project's own tests pass with only what the project declares installed.

The render matrix runs every combination in the suite's environment, which holds
every broker's libraries. Here one project per broker gets a virtual environment
of its own, made as its README says before the runtime is published
(`python -m venv`, then `pip install -e <checkout>/runtime -e '.[dev]'`: the
runtime from this checkout, everything else from the package index pip is
configured with), and its tests run there, with the settings a user who ran the
worker has exported in the shell and written to `.env`: none of them may change
what the tests see.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
# The runtime of this checkout, not yet on the package index.
RUNTIME = REPO_ROOT / "runtime"
# One project per broker; the SQS one also has the HTTP front door, whose
# dependencies (FastAPI, and httpx for its tests) only such projects declare.
PROJECTS = {
    "redis": {"broker": "redis", "result_backend": "redis"},
    "rabbitmq": {"broker": "rabbitmq", "rabbitmq_queue_type": "quorum"},
    "sqs": {"broker": "sqs", "http_api": True},
}
# Settings as a developer's shell holds them after running the worker
# somewhere else: every value valid, none the project's default.
EXPORTED = {
    "RESULT_BACKEND_URL": "redis://127.0.0.1:9/6",
    "LOCK_URL": "redis://127.0.0.1:9/7",
    "QUEUE_NAMESPACE": "elsewhere",
    "VISIBILITY_TIMEOUT": "7200",
    "TASK_MAX_RETRIES": "9",
    "TASK_MAX_DELIVERIES": "2",
    "UNKNOWN_TASK_GRACE": "5",
    "LANE_PREFETCH": '{"default": 2}',
    "LOG_LEVEL": "DEBUG",
    "LOG_FORMAT": "text",
    "LOG_EVERY_JOB": "true",
    "TIMEZONE": "Europe/Madrid",
    "METRICS_PORT": "9999",
    "MONITOR_BASIC_AUTH": "ops:secret",
    "SQS_REGION": "eu-west-3",
    "HTTP_PORT": "9998",
    "HTTP_TOKEN": "a-token-of-the-shell",
}
EXPORTED_BROKER_URL = {
    "redis": "redis://127.0.0.1:9/5",
    "rabbitmq": "amqp://ops:secret@127.0.0.1:9/elsewhere",
    "sqs": "sqs://key:secret@127.0.0.1:9",
}
# The runtime's `sqs` and `http` extras: only the SQS project asks for them (it has
# the HTTP front door too); the others must run without them.
OF_EXTRAS = ("boto3", "botocore", "pycurl", "fastapi", "uvicorn")
WHICH_ARE_INSTALLED = (
    f"import importlib.util as u; print([m for m in {OF_EXTRAS!r} if u.find_spec(m)])"
)
WHERE_THE_RUNTIME_IS = "import workergen_runtime as r; print(r.__file__)"


def run(args: list[str], cwd: Path, env: dict[str, str], timeout: int):
    return subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


@pytest.mark.parametrize("broker", list(PROJECTS))
def test_a_project_s_tests_pass_in_a_fresh_venv_with_the_shell_s_settings(
    render, tmp_path: Path, broker: str
) -> None:
    # A copy: the `.env` written below stays out of the session's rendered project.
    project = shutil.copytree(render(**PROJECTS[broker]), tmp_path / "billing")
    shell_settings = {**EXPORTED, "BROKER_URL": EXPORTED_BROKER_URL[broker]}
    (project / ".env").write_text("".join(f"{k}={v}\n" for k, v in shell_settings.items()))
    # Nothing of the suite's own environment reaches the new one.
    env = {
        name: value
        for name, value in os.environ.items()
        if name not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")
    }
    venv = tmp_path / "venv"
    python = str(venv / "bin" / "python")
    started = time.monotonic()
    made = run([sys.executable, "-m", "venv", str(venv)], tmp_path, env, 300)
    assert made.returncode == 0, made.stderr
    # One pip command, so the resolver takes the runtime the project asks for from
    # the checkout. The runtime is named without extras: those the project's
    # dependencies ask for (`sqs`, `http`) are the only ones installed.
    installed = run(
        [python, "-m", "pip", "install", "--quiet", "-e", str(RUNTIME), "-e", f"{project}[dev]"],
        tmp_path,
        env,
        900,
    )
    assert installed.returncode == 0, installed.stdout[-3000:] + installed.stderr[-3000:]
    set_up = time.monotonic() - started

    runtime = run([python, "-c", WHERE_THE_RUNTIME_IS], tmp_path, env, 60)
    assert runtime.returncode == 0, runtime.stderr
    assert Path(runtime.stdout.strip()).is_relative_to(RUNTIME), runtime.stdout
    found = run([python, "-c", WHICH_ARE_INSTALLED], tmp_path, env, 60)
    assert found.returncode == 0, found.stderr
    assert found.stdout.strip() == (str(list(OF_EXTRAS)) if broker == "sqs" else "[]")

    shell = {**env, **shell_settings}
    pytest_args = ["-m", "pytest", "-q", "-p", "no:cacheprovider", "-rfEs"]
    tests = run([python, *pytest_args], project, shell, 1200)
    ran = time.monotonic() - started - set_up
    output = tests.stdout + tests.stderr
    assert tests.returncode == 0, output[-6000:]
    summary = output.strip().splitlines()[-1]
    assert re.search(r"\d+ passed", summary) and "failed" not in summary, summary
    # A test skipped because its module could not be imported hides a missing dependency.
    skipped = [line for line in output.splitlines() if line.startswith("SKIPPED")]
    assert not [line for line in skipped if re.search(r"import|module", line, re.I)], skipped
    print(f"{broker}: venv and install {set_up:.0f} s, tests {ran:.0f} s: {summary}")
