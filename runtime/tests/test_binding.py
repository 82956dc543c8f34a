"""How the runtime learns which project it serves: the project's package binds it.

Each case runs in a fresh interpreter: the test session itself is bound to the
sample project already.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from bound import answer_independent

import workergen_runtime

SAMPLE = Path(__file__).resolve().parent / "sample"


def run(code: str, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if k != "WORKERGEN_PROJECT"}
    return subprocess.run(
        [sys.executable, "-c", code],
        env={**clean, "PYTHONPATH": str(SAMPLE), **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_importing_the_project_binds_the_runtime_to_its_answers() -> None:
    done = run(
        "import billing\n"
        "from workergen_runtime import project\n"
        "from workergen_runtime.settings import Settings\n"
        "print(project.PACKAGE, project.LANES, Settings.broker)\n",
        WORKERGEN_TEST_BROKER="sqs",
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["billing", "('critical',", "'default',", "'batch')", "sqs"]


# No project is bound in the processes of the tests marked answer_independent: no
# answer can be read there.
@answer_independent
def test_without_a_project_the_runtime_says_how_to_bind_one() -> None:
    done = run("from workergen_runtime import project\nproject.LANES\n")
    assert done.returncode == 1
    assert "No workergen project is bound" in done.stderr
    assert "WORKERGEN_PROJECT" in done.stderr


def test_workergen_project_names_the_package_for_processes_that_import_the_runtime_first() -> None:
    done = run(
        "from workergen_runtime.celery_app import app\nprint(app.main)\n",
        WORKERGEN_PROJECT="billing",
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "billing"


@answer_independent
def test_a_workergen_project_that_cannot_be_imported_is_named() -> None:
    done = run("from workergen_runtime import project\nproject.PACKAGE\n", WORKERGEN_PROJECT="nope")
    assert done.returncode == 1
    assert "WORKERGEN_PROJECT='nope' cannot be imported" in done.stderr


def test_a_process_serves_one_project() -> None:
    done = run(
        "import types\n"
        "import billing\n"
        "from workergen_runtime import project\n"
        "other = types.ModuleType('shop.project')\n"
        "for name in project.ANSWERS:\n"
        "    setattr(other, name, getattr(project, name))\n"
        "other.PACKAGE = 'shop'\n"
        "project.bind(other)\n"
    )
    assert done.returncode == 1
    assert "already serves project 'billing'" in done.stderr
    assert "cannot also serve 'shop'" in done.stderr


@answer_independent
def test_a_module_without_the_answers_is_refused() -> None:
    done = run(
        "import types\n"
        "from workergen_runtime import project\n"
        "project.bind(types.ModuleType('shop.project'))\n"
    )
    assert done.returncode == 1
    assert "shop.project lacks PACKAGE" in done.stderr


@answer_independent
def test_the_public_api_is_what_the_package_exports_and_costs_nothing_to_import() -> None:
    assert workergen_runtime.__all__ == sorted(workergen_runtime._EXPORTS)
    for name in workergen_runtime.__all__:
        assert getattr(workergen_runtime, name) is not None, name
    done = run(
        "import sys\nimport workergen_runtime\n"
        "print(sorted(m for m in ('celery', 'kombu', 'pydantic_settings') if m in sys.modules))\n"
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
