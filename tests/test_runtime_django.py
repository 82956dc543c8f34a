"""The runtime's Django tests pass for every broker a Django project's workers may use.

runtime/tests/django runs against a sample Django project (runtime/tests/django/sample)
whose broker comes from the environment; a process serves one project, so each broker
runs in a process of its own, with a PostgreSQL database of its own.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
DJANGO_TESTS = REPO_ROOT / "runtime" / "tests" / "django"


@pytest.mark.parametrize("broker", ["redis", "rabbitmq"])
def test_the_runtime_django_tests_pass(broker: str) -> None:
    database = f"workergen_django_{broker}_{uuid.uuid4().hex[:8]}"
    env = {**os.environ, "WORKERGEN_TEST_BROKER": broker, "WORKERGEN_TEST_DJANGO_DB": database}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", str(DJANGO_TESTS)],
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
    assert f"django sample project: broker {broker}, database {database}" in done.stdout, output
