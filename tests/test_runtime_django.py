"""The runtime's Django tests pass for every broker a Django project's workers may use.

runtime/tests/django runs against a sample Django project (runtime/tests/django/sample)
whose broker comes from the environment; a process serves one project, so each broker
runs in a process of its own, with a PostgreSQL database of its own. The tests no
broker can change run in the Redis run only (skipped, with the reason, in the others).
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
    # The broker-independent tests run in the Redis run, and only there.
    independent = "broker-independent: runs in the redis run"
    assert (independent in done.stdout) is (broker != "redis"), output


def test_workergen_make_job_writes_into_the_django_app_that_app_names(tmp_path: Path) -> None:
    import shutil

    project = tmp_path / "site"
    shutil.copytree(DJANGO_TESTS / "sample", project, ignore=shutil.ignore_patterns("__pycache__"))
    (project / ".copier-answers.workergen.yml").write_text(
        "add_to: django\ndjango_app: accounts\nlanes: default,critical\n"
    )

    def make(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "workergen", "make:job", *args],
            cwd=project / "accounts",
            capture_output=True,
            text=True,
            timeout=60,
        )

    done = make("SendInvoice", "--app", "accounts", "--queue", "critical")
    assert done.returncode == 0, done.stderr
    job = project / "accounts" / "jobs" / "send_invoice.py"
    assert '@job(name="accounts.send_invoice", queue="critical")' in job.read_text()
    assert (project / "accounts" / "test_send_invoice.py").is_file()
    refused = make("Other")
    assert refused.returncode == 1 and "--app" in refused.stderr
    assert "Traceback" not in refused.stderr
    assert not (project / "accounts" / "jobs" / "other.py").exists()
    # A new lane is an answer the project's files are rendered from: the hint says how.
    new_lane = make("Ship", "--app", "accounts", "--queue", "shipping", "--add-lane")
    assert new_lane.returncode == 1 and "Traceback" not in new_lane.stderr
    assert "--add-lane cannot add 'shipping' in a Django project" in new_lane.stderr
    assert (
        "copier update --answers-file .copier-answers.workergen.yml --defaults "
        "--data lanes=default,critical,shipping"
    ) in " ".join(new_lane.stderr.split())
    assert not (project / "accounts" / "jobs" / "ship.py").exists()


def test_app_is_refused_outside_a_django_project(tmp_path: Path) -> None:
    import shutil

    project = tmp_path / "billing-project"
    shutil.copytree(
        REPO_ROOT / "runtime" / "tests" / "sample",
        project,
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    (project / ".copier-answers.yml").write_text(
        "_src_path: gh:example/workergen\npackage_name: billing\nlanes: critical,default,batch\n"
    )
    done = subprocess.run(
        [sys.executable, "-m", "workergen", "make:job", "Refund", "--app", "accounts"],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1
    assert "not a Django project" in done.stderr and "Traceback" not in done.stderr
    assert not (project / "billing" / "jobs" / "refund.py").exists()
