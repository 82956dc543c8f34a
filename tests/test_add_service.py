"""`workergen add` in a FastAPI or plain Python service: what it writes, edits, refuses, and runs.

Each test starts from a small service in a temporary folder, as a team has one:
a pyproject.toml (or requirements.txt), a package, and tests of its own.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import redis
import yaml

from support.adding import run, snapshot
from support.cleanup import delete_redis_keys
from support.projects import Project, unique_namespace
from support.releases import (
    clone_repository,
    commit_all,
    git,
    git_identity,  # noqa: F401 (autouse: a git that can commit)
    make_release,
)

ANSWERS = ".copier-answers.workergen.yml"
REPO = Path(__file__).resolve().parents[1]
RUNTIME_RANGE = ">=0.1,<0.2"

PYPROJECT = """\
[project]
name = "shop"
version = "0.1.0"
requires-python = ">=3.11"
dependencies = [
    "fastapi>=0.110",
]
"""
MAIN = """\
from fastapi import FastAPI

app = FastAPI()


@app.get("/health")
def health() -> dict[str, str]:
    return {"status": "ok"}
"""
MAIN_TEST = """\
from fastapi.testclient import TestClient

from app.main import app


def test_health() -> None:
    assert TestClient(app).get("/health").json() == {"status": "ok"}
"""


def fastapi_service(folder: Path) -> Path:
    """A FastAPI service: pyproject.toml depending on fastapi, `app/main.py`, a test."""
    (folder / "app").mkdir(parents=True)
    (folder / "tests").mkdir()
    (folder / "pyproject.toml").write_text(PYPROJECT)
    (folder / "app" / "__init__.py").write_text("")
    (folder / "app" / "main.py").write_text(MAIN)
    (folder / "tests" / "test_main.py").write_text(MAIN_TEST)
    return folder


def plain_service(folder: Path) -> Path:
    """A plain Python service: requirements.txt, a package `ledger`, a test."""
    (folder / "ledger").mkdir(parents=True)
    (folder / "tests").mkdir()
    (folder / "requirements.txt").write_text("requests>=2.31\n")
    (folder / "ledger" / "__init__.py").write_text("def total(amounts):\n    return sum(amounts)\n")
    (folder / "tests" / "test_ledger.py").write_text(
        "from ledger import total\n\n\ndef test_total():\n    assert total([1, 2]) == 3\n"
    )
    return folder


@pytest.fixture
def service(tmp_path: Path) -> Path:
    return fastapi_service(tmp_path / "shop")


def own_tests(root: Path) -> subprocess.CompletedProcess[str]:
    """The service's whole test suite, as its team runs it: from its folder, on sys.path."""
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly"],
        cwd=root,
        env={**os.environ, "PYTHONPATH": str(root)},
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_add_in_a_fastapi_service_writes_a_worker_package_and_asks_for_the_dependency(
    service: Path,
):
    before = snapshot(service)

    result = run(service, "add", "--defaults", "--yes")

    assert result.exit_code == 0, result.output
    after = snapshot(service)
    created = sorted(set(after) - set(before))
    assert created == [
        ANSWERS,
        ".env.example",
        "app/worker_routes.py",
        "deploy/workers/shop_workers-scheduler.service",
        "deploy/workers/shop_workers-worker@.service",
        "shop_workers/__init__.py",
        "shop_workers/__main__.py",
        "shop_workers/app.py",
        "shop_workers/crons/__init__.py",
        "shop_workers/jobs/__init__.py",
        "shop_workers/jobs/hello.py",
        "shop_workers/project.py",
        "tests/jobs/conftest.py",
        "tests/jobs/test_hello.py",
        "tests/jobs/test_job_modules.py",
        "tests/jobs/test_worker_routes.py",
    ]
    # One file of the service's changes: its dependencies, shown as a diff first.
    assert sorted(name for name in before if before[name] != after[name]) == ["pyproject.toml"]
    assert '+    "workergen-runtime[http]' in result.output
    assert (service / "pyproject.toml").read_text() == PYPROJECT.replace(
        '    "fastapi>=0.110",\n',
        f'    "fastapi>=0.110",\n    "workergen-runtime[http]{RUNTIME_RANGE}",\n',
    )
    # The app module is the user's: never edited; the routes are included by hand.
    assert (service / "app" / "main.py").read_text() == MAIN
    assert "app.include_router(worker_routes)" in result.output
    for name in created:
        assert f"create   {name}" in result.output
    assert "python -m shop_workers queue work" in result.output

    answers = yaml.safe_load((service / ANSWERS).read_text())
    assert {key: value for key, value in answers.items() if key[:1] != "_"} == {
        "add_to": "service",
        "broker": "redis",
        "description": "Background workers for shop",
        "http_api": False,
        "lanes": "critical,default,batch",
        "package_name": "shop_workers",
        "project_name": "shop",
        "queue_namespace": "shop",
        "result_backend": "none",
        "service_framework": "fastapi",
        "service_package": "app",
    }
    # The worker package is a generated project's package: the same files, bound the same way.
    generated = REPO / "template" / "{{package_name}}"
    for name in ("__main__.py", "app.py", "jobs/__init__.py", "crons/__init__.py"):
        assert (service / "shop_workers" / name).read_bytes() == (generated / name).read_bytes()
    init = (service / "shop_workers" / "__init__.py").read_text()
    assert "bind(project)" in init
    unit = (service / "deploy/workers/shop_workers-worker@.service").read_text()
    assert "python -m shop_workers queue work --queue %i --pidfile" in unit


def test_a_second_run_changes_nothing_and_says_so(service: Path):
    assert run(service, "add", "--defaults", "--yes").exit_code == 0
    before = snapshot(service)

    result = run(service, "add", "--defaults", "--yes")

    assert result.exit_code == 0, result.output
    assert "Nothing to change: the workers are added already" in result.output
    assert snapshot(service) == before


def test_a_declined_dependency_edit_leaves_the_file_and_says_what_to_add(service: Path):
    result = run(service, "add", "--defaults", input="n\n")

    assert result.exit_code == 1, result.output
    assert (service / "pyproject.toml").read_text() == PYPROJECT
    assert f'"workergen-runtime[http]{RUNTIME_RANGE}"' in result.output
    assert (service / "shop_workers" / "__init__.py").is_file()


def test_a_service_folder_of_the_same_name_is_never_overwritten(service: Path):
    (service / "shop_workers").mkdir()
    (service / "shop_workers" / "__init__.py").write_text("# ours\n")
    before = snapshot(service)

    result = run(service, "add", "--defaults", "--yes")

    assert result.exit_code == 1
    assert "shop_workers/__init__.py is there already and is not workergen's" in result.output
    assert "--data package_name=NAME" in result.output
    assert snapshot(service) == before
    # Another name for the worker package, and the add goes through.
    result = run(service, "add", "--defaults", "--yes", "--data", "package_name=shop_jobs")
    assert result.exit_code == 0, result.output
    assert (service / "shop_jobs" / "jobs" / "hello.py").is_file()


def test_a_plain_python_service_gets_the_workers_without_routes(tmp_path: Path):
    service = plain_service(tmp_path / "ledger-service")
    (service / ".env.example").write_text("DATABASE_URL=postgres://localhost/ledger\n")

    result = run(service, "add", "--defaults", "--yes", "--broker", "sqs")

    assert result.exit_code == 0, result.output
    assert (service / "ledger_service_workers" / "jobs" / "hello.py").is_file()
    assert not list(service.rglob("worker_routes.py"))
    assert not (service / "tests" / "jobs" / "test_worker_routes.py").exists()
    assert (service / "requirements.txt").read_text() == (
        f"requests>=2.31\nworkergen-runtime[sqs]{RUNTIME_RANGE}\n"
    )
    env = (service / ".env.example").read_text()
    assert env.startswith("DATABASE_URL=postgres://localhost/ledger\n\n# The workers' settings")
    assert "BROKER_URL=sqs://" in env and "QUEUE_NAMESPACE=ledger-service" in env
    answers = yaml.safe_load((service / ANSWERS).read_text())
    assert (answers["service_framework"], answers["service_package"]) == ("plain", "")
    assert "include_router" not in result.output

    # The service's own tests and the workers' pass, with no edit by hand.
    done = own_tests(service)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "4 passed" in done.stdout, done.stdout


@pytest.mark.parametrize(
    ("files", "what"),
    [
        ({}, "an empty folder"),
        ({"pyproject.toml": PYPROJECT}, "dependencies but no package"),
        ({"app/__init__.py": ""}, "a package but no dependencies"),
    ],
)
def test_a_folder_that_is_no_project_is_refused_in_a_few_lines(
    tmp_path: Path, files: dict[str, str], what: str
):
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)

    result = run(tmp_path, "add", "--defaults", "--yes")

    assert result.exit_code == 1, what
    assert "is not a project workergen add knows" in result.output
    assert "pyproject.toml or requirements.txt beside a Python package" in result.output
    assert "docs/existing-projects.md" in result.output
    assert "Traceback" not in result.output
    assert len(result.output.splitlines()) <= 8
    assert sorted(p.name for p in tmp_path.rglob("*") if p.is_file()) == sorted(
        Path(name).name for name in files
    )


def test_an_app_package_that_is_not_there_is_refused(service: Path):
    result = run(service, "add", "--defaults", "--yes", "--app", "web")

    assert result.exit_code == 1
    assert "'web' is not a package of this service (found: app)" in result.output


def test_the_service_tests_pass_and_a_worker_runs_a_job_queued_by_its_route(
    service: Path, redis_url: str
):
    namespace = unique_namespace("wgsvc")
    result = run(
        service,
        "add",
        "--defaults",
        "--yes",
        "--namespace",
        namespace,
        "--data",
        "result_backend=redis",
    )
    assert result.exit_code == 0, result.output

    # The team's suite, with the workers' tests in it, passes as it is.
    done = own_tests(service)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "6 passed" in done.stdout, done.stdout

    # The team includes the routes in its app (by hand: workergen add asked them to).
    main = service / "app" / "main.py"
    main.write_text(
        MAIN + "\nfrom app.worker_routes import router as worker_routes  # noqa: E402\n\n"
        "app.include_router(worker_routes)\n"
    )
    project = Project(
        service,
        "shop_workers",
        {
            "BROKER_URL": redis_url,
            "RESULT_BACKEND_URL": redis_url,
            "QUEUE_NAMESPACE": namespace,
        },
    )
    client_code = (
        "import json, sys, time\n"
        "from fastapi.testclient import TestClient\n"
        "from app.main import app\n"
        "client = TestClient(app)\n"
        "answer = client.post('/greetings', json={'name': 'Ada'})\n"
        "print(json.dumps({'status': answer.status_code,"
        " 'location': answer.headers.get('location'), 'body': answer.json()}), flush=True)\n"
        "deadline = time.monotonic() + 60\n"
        "while True:\n"
        "    state = client.get(answer.headers['location'])\n"
        "    finished = state.json().get('state') in ('SUCCESS', 'FAILURE')\n"
        "    if finished or time.monotonic() > deadline:\n"
        "        break\n"
        "    time.sleep(0.2)\n"
        "print(json.dumps({'status': state.status_code, 'body': state.json()}))\n"
    )
    job_id = None
    with project.worker("--queue", "default"):
        done = project.python(client_code, timeout=120)
        try:
            assert done.returncode == 0, done.stderr
            accepted, state = (json.loads(line) for line in done.stdout.splitlines()[-2:])
            job_id = accepted["body"]["id"]
            assert accepted["status"] == 202
            assert accepted["location"] == f"/jobs/{job_id}"
            assert accepted["body"] == {
                "id": job_id,
                "job": "shop_workers.hello",
                "status_url": f"/jobs/{job_id}",
            }
            assert state == {
                "status": 200,
                "body": {"id": job_id, "state": "SUCCESS", "result": "Hello, Ada!"},
            }
        finally:
            delete_redis_keys(redis_url, [namespace])
            if job_id is not None:
                redis.Redis.from_url(redis_url).delete(f"celery-task-meta-{job_id}")


def test_make_job_and_doctor_run_in_the_service(service: Path):
    assert run(service, "add", "--defaults", "--yes").exit_code == 0
    project = Project(service, "shop_workers", {})

    made = project.run("make:job", "SendInvoice")

    assert made.returncode == 0, made.stderr
    assert (service / "shop_workers" / "jobs" / "send_invoice.py").is_file()
    assert (service / "tests" / "jobs" / "test_send_invoice.py").is_file()
    lanes = project.run("queue", "lanes")
    assert lanes.returncode == 0, lanes.stderr
    assert "shop.default" in lanes.stdout
    # The new job's test is one of the service's tests, and passes.
    done = own_tests(service)
    assert done.returncode == 0, done.stdout + done.stderr


def test_workergen_update_brings_a_fix_of_the_generated_projects_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    clone = clone_repository(tmp_path / "workergen")
    monkeypatch.setenv("WORKERGEN_TEMPLATE_URL", str(clone))
    service = fastapi_service(tmp_path / "shop")
    assert run(service, "add", "--defaults", "--yes").exit_code == 0
    git(service, "init", "-q")
    commit_all(service, "Workers added")
    result = run(service, "update")
    assert result.exit_code == 0, result.output
    assert "up to date" in result.output

    # A newer template fixes a file of every generated project: the service's workers get it.
    source = clone / "template" / "{{package_name}}" / "app.py"
    source.write_text(source.read_text() + "# A fix of the template.\n")
    commit_all(clone, "Template: a fix of the app module")
    make_release(clone, "9.9.0")
    pyproject = (service / "pyproject.toml").read_bytes()

    result = run(service, "update", "--template", str(clone))

    assert result.exit_code == 0, result.output
    assert "changed  shop_workers/app.py" in result.output
    assert (service / "shop_workers" / "app.py").read_text().endswith("# A fix of the template.\n")
    assert (service / "pyproject.toml").read_bytes() == pyproject
    assert (service / "app" / "main.py").read_text() == MAIN
    assert yaml.safe_load((service / ANSWERS).read_text())["_commit"].startswith("v9.9.0")


@pytest.mark.parametrize(
    ("pyproject", "expected"),
    [
        (
            '[project]\nname = "x"\ndependencies = [\n    "fastapi",\n    "uvicorn[standard]"\n]\n'
            "\n[tool.ruff]\nline-length = 100\n",
            '[project]\nname = "x"\ndependencies = [\n    "fastapi",\n    "uvicorn[standard]",\n'
            '    "workergen-runtime[http]>=0.1,<0.2",\n]\n\n[tool.ruff]\nline-length = 100\n',
        ),
        (
            '[project]\nname = "x"\ndependencies = ["fastapi"]  # ours\n',
            '[project]\nname = "x"\ndependencies = ["fastapi", "workergen-runtime[http]>=0.1,<0.2"]'
            "  # ours\n",
        ),
        (
            '[project]\nname = "x"\ndependencies = []\n',
            '[project]\nname = "x"\ndependencies = ["workergen-runtime[http]>=0.1,<0.2"]\n',
        ),
        ('[project]\nname = "x"\ndynamic = ["dependencies"]\n', None),
        ('[tool.poetry]\nname = "x"\n', None),
    ],
    ids=["multi-line", "one-line", "empty", "dynamic", "no-project-table"],
)
def test_the_dependency_is_appended_where_toml_reads_it(pyproject: str, expected: str | None):
    from workergen.add.service import add_project_dependency

    assert add_project_dependency(pyproject, "workergen-runtime[http]>=0.1,<0.2") == expected


def test_a_service_with_fastapi_in_its_requirements_gets_the_routes_in_its_package(tmp_path: Path):
    service = tmp_path / "orders"
    (service / "api").mkdir(parents=True)
    (service / "api" / "__init__.py").write_text("")
    (service / "worker").mkdir()
    (service / "worker" / "__init__.py").write_text("")
    (service / "requirements.txt").write_text("fastapi[standard]==0.115.0")

    result = run(service, "add", "--defaults", "--yes", "--app", "api")

    assert result.exit_code == 0, result.output
    assert (service / "api" / "worker_routes.py").is_file()
    assert (service / "requirements.txt").read_text() == (
        f"fastapi[standard]==0.115.0\nworkergen-runtime[http]{RUNTIME_RANGE}\n"
    )
    # Two packages and no FastAPI( call to tell them apart: --app is needed.
    other = tmp_path / "billing"
    shutil.copytree(service, other, ignore=shutil.ignore_patterns("*workers*", ".copier*"))
    (other / "requirements.txt").write_text("fastapi\n")
    refused = run(other, "add", "--defaults", "--yes")
    assert refused.exit_code == 1
    assert "which package holds your FastAPI app? api, worker" in refused.output
    assert "Pass --app PACKAGE" in refused.output
    assert not (other / "billing_workers").exists()


def test_a_folder_with_manage_py_is_a_django_project_first(service: Path):
    (service / "manage.py").write_text("print('not a real one')\n")

    result = run(service, "add", "--defaults", "--yes")

    assert result.exit_code == 1
    assert "manage.py sets no default DJANGO_SETTINGS_MODULE" in result.output
    assert not (service / "shop_workers").exists()
