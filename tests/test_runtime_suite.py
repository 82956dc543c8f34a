"""The worker runtime's own tests pass for every broker and every answer it behaves differently on.

runtime/tests runs against a sample project whose broker, RabbitMQ queue type,
HTTP front door and default namespace come from the environment
(runtime/tests/conftest.py); a process serves one project, so each combination
runs in a process of its own.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
RUNTIME_TESTS = REPO_ROOT / "runtime" / "tests"
SAMPLE = RUNTIME_TESTS / "sample" / "billing"
DEFAULTS = {
    "WORKERGEN_TEST_BROKER": "redis",
    "WORKERGEN_TEST_QUEUE_TYPE": "classic",
    "WORKERGEN_TEST_HTTP_API": "false",
    "WORKERGEN_TEST_NAMESPACE": "billing",
}
# Each broker runs twice: with the default answers, then with every other value of
# the answers that behave differently by broker (the HTTP front door, the empty
# namespace with no prefix and, on RabbitMQ, quorum queues) at once.
SECOND_RUN = {"WORKERGEN_TEST_HTTP_API": "true", "WORKERGEN_TEST_NAMESPACE": ""}
RUNS = [
    pytest.param({"WORKERGEN_TEST_BROKER": "redis"}, id="redis"),
    pytest.param({"WORKERGEN_TEST_BROKER": "rabbitmq"}, id="rabbitmq"),
    pytest.param({"WORKERGEN_TEST_BROKER": "sqs"}, id="sqs"),
    pytest.param({"WORKERGEN_TEST_BROKER": "redis", **SECOND_RUN}, id="redis-http_api-ns_none"),
    pytest.param(
        {"WORKERGEN_TEST_BROKER": "rabbitmq", "WORKERGEN_TEST_QUEUE_TYPE": "quorum", **SECOND_RUN},
        id="rabbitmq-quorum-http_api-ns_none",
    ),
    pytest.param({"WORKERGEN_TEST_BROKER": "sqs", **SECOND_RUN}, id="sqs-http_api-ns_none"),
]


@pytest.mark.parametrize("answers", RUNS)
def test_the_runtime_tests_pass(answers: dict[str, str]) -> None:
    env = {**os.environ, **DEFAULTS, **answers}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", str(RUNTIME_TESTS)],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    output = done.stdout[-20_000:] + done.stderr[-5_000:]
    # 5 is "no tests collected": a failure here as much as a failed test.
    assert done.returncode == 0, output
    assert re.search(r"\b[1-9]\d* passed\b", done.stdout), output
    # The tests ran against the project these answers make.
    bound = (
        f"sample project: broker {env['WORKERGEN_TEST_BROKER']}, "
        f"queue type {env['WORKERGEN_TEST_QUEUE_TYPE']}, "
        f"http api {env['WORKERGEN_TEST_HTTP_API'] == 'true'}, "
        f"namespace {env['WORKERGEN_TEST_NAMESPACE']!r}"
    )
    assert bound in done.stdout, output
    # The tests marked answer_independent run in the default run only (runtime/tests/conftest.py):
    # it skips none of them, and each other run skips them, saying so (-ra lists the reasons).
    default_run = {**DEFAULTS, **answers} == DEFAULTS
    assert ("answer-independent" in done.stdout) is not default_run, output


def test_the_sample_project_is_what_workergen_new_writes(render) -> None:
    """Apart from its answers, which the environment chooses: the runtime serves it as it
    serves a generated project."""
    rendered = render(broker="redis") / "billing"
    files = sorted(
        path.relative_to(SAMPLE)
        for path in SAMPLE.rglob("*.py")
        if "__pycache__" not in path.parts and path.name != "project.py"
    )
    assert Path("__init__.py") in files and Path("jobs/hello.py") in files
    for path in files:
        assert (SAMPLE / path).read_text() == (rendered / path).read_text(), path
