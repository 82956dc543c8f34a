"""A job or cron module that cannot be imported stops the worker and the scheduler, in one line."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from support.projects import Project

# What `make:job Send2 --retry-for os.nope` used to write: it fails when imported.
BROKEN_JOB = '''"""The send2 job."""

import logging
import os

from workergen_runtime import job

log = logging.getLogger(__name__)


@job(name="billing.send2", queue="default", retry_for=(os.nope,))
class Send2Job:
    def handle(self) -> None:
        log.info("ran")
'''
BROKEN_CRON = "from workergen_runtime import cron_task\n\ndef oops(:\n"
BROKEN_PACKAGE = 'raise RuntimeError("boom")\n'

CASES = {
    "job": ("billing/jobs/send2.py", BROKEN_JOB, "billing.jobs.send2", "AttributeError"),
    "cron": ("billing/crons/nightly.py", BROKEN_CRON, "billing.crons.nightly", "SyntaxError"),
    "package": ("billing/jobs/pkg/__init__.py", BROKEN_PACKAGE, "billing.jobs.pkg", "RuntimeError"),
}


@pytest.fixture(params=sorted(CASES))
def broken(request, render, tmp_path: Path) -> tuple[Project, str, str]:
    path, source, module, error = CASES[request.param]
    project = Project.copy_of(
        render(broker="redis"), tmp_path / "billing", "billing", BROKER_URL="redis://127.0.0.1:9"
    )
    (project.root / path).parent.mkdir(exist_ok=True)
    (project.root / path).write_text(source)
    return project, module, error


@pytest.mark.parametrize(
    "command",
    [
        ("queue", "work"),
        ("schedule", "work"),
        ("schedule", "list"),
        ("queue", "dispatch", "hello"),
    ],
)
def test_a_module_that_cannot_be_imported_stops_the_command(broken, command):
    project, module, error = broken

    result = project.run(*command, timeout=60)

    output = result.stdout + result.stderr
    assert result.returncode == 1, output
    assert f"Cannot import {module}: {error}" in output
    assert "Traceback" not in output
    assert len(output.strip().splitlines()) == 1, output


def test_the_projects_own_tests_fail_on_it(broken):
    project, module, error = broken

    tested = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--tb=short", "tests"],
        cwd=project.root,
        env=project.env,
        capture_output=True,
        text=True,
        timeout=300,
    )

    assert tested.returncode == 1, tested.stdout + tested.stderr
    failed = f"FAILED tests/test_discovery.py::test_the_module_imports[{module}]"
    assert failed in tested.stdout
    assert f"E   {error}" in tested.stdout or f"E       {error}" in tested.stdout, tested.stdout
