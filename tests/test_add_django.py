"""`workergen add` in a Django project: what it writes, edits, refuses, and how it updates.

Each test starts from what Django makes: `django-admin startproject config .` and
`python manage.py startapp accounts`, in a temporary folder.
"""

from __future__ import annotations

import ast
import os
import secrets
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from support.adding import run, snapshot
from support.brokers import IN_CI, require_broker
from support.cleanup import delete_redis_keys
from support.releases import (
    BIN,
    clone_repository,
    commit_all,
    git,
    git_identity,  # noqa: F401 (autouse: a git that can commit)
    make_release,
)
from workergen.cli import app

runner = CliRunner()
ANSWERS = ".copier-answers.workergen.yml"
ADD = ("add", "--app", "accounts", "--broker", "redis", "--defaults")
CELERY_PY = (
    "import os\n\n"
    'os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")\n\n'
    "from workergen_runtime.django import setup  # noqa: E402\n\n"
    "from . import workers  # noqa: E402\n\n"
    "app = setup(workers)\n"
)


def django_project(folder: Path) -> Path:
    """What `django-admin startproject config .` and `startapp accounts` make in `folder`."""
    folder.mkdir(parents=True)
    for args in (["startproject", "config", "."], ["startapp", "accounts"]):
        subprocess.run([sys.executable, "-m", "django", *args], cwd=folder, check=True)
    return folder


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return django_project(tmp_path / "shop")


def module_values(path: Path) -> dict[str, object]:
    """The constants a module assigns at its top level."""
    values: dict[str, object] = {}
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None:
            target = node.targets[0] if isinstance(node, ast.Assign) else node.target
            if isinstance(target, ast.Name):
                try:
                    values[target.id] = ast.literal_eval(node.value)
                except ValueError:
                    continue
    return values


def installed_apps(project: Path) -> list[str]:
    return list(module_values(project / "config" / "settings.py")["INSTALLED_APPS"])  # type: ignore[call-overload]


def test_add_writes_the_workers_and_edits_the_settings(project: Path):
    before = snapshot(project)

    result = run(project, *ADD, "--yes")

    assert result.exit_code == 0, result.output
    after = snapshot(project)
    created = sorted(set(after) - set(before))
    assert created == [
        ANSWERS,
        ".env.example",
        "accounts/jobs/__init__.py",
        "config/celery.py",
        "config/workers.py",
        "conftest.py",
        "deploy/workers/scheduler.service",
        "deploy/workers/worker@.service",
        "pytest.ini",
    ]
    changed = sorted(name for name in before if before[name] != after[name])
    assert changed == ["config/__init__.py", "config/settings.py"]
    for name in created + changed:
        assert f"create   {name}" in result.output or f"edit     {name}" in result.output

    assert (project / "config" / "celery.py").read_text() == CELERY_PY
    assert module_values(project / "config" / "workers.py") == {
        "PACKAGE": "config",
        "PROJECT_NAME": "shop",
        "BROKER": "redis",
        "LANES": ("critical", "default", "batch"),
        "DEFAULT_NAMESPACE": "shop",
        "RESULT_BACKEND": "none",
        "SQS_REGION": "us-east-1",
        "QUEUE_TYPE": "classic",
        "HTTP_API": False,
        "FRAMEWORK": "django",
        "DJANGO_SCHEDULER": "crons",
        "DJANGO_RESULTS": False,
    }
    assert (project / "config" / "__init__.py").read_text() == (
        'from .celery import app as celery_app\n\n__all__ = ("celery_app",)\n'
    )
    # The app's jobs are found because it is installed, and ours is installed beside it.
    apps = installed_apps(project)
    assert apps[-2:] == ["accounts", "workergen_runtime.django"]
    assert apps[:-2] == list(module_values(before_settings(before))["INSTALLED_APPS"])  # type: ignore[call-overload]
    # The settings keep Django's own quotes, and hold no broker setting of ours.
    settings = (project / "config" / "settings.py").read_text()
    assert "    'accounts',\n    'workergen_runtime.django',\n]" in settings
    assert "BROKER" not in settings

    env = (project / ".env.example").read_text()
    assert "BROKER_URL=redis://localhost:6379/0" in env
    assert "QUEUE_NAMESPACE=shop" in env
    assert "DJANGO_SETTINGS_MODULE = config.settings" in (project / "pytest.ini").read_text()
    assert "workergen_runtime.django.testing" in (project / "conftest.py").read_text()
    worker_unit = (project / "deploy" / "workers" / "worker@.service").read_text()
    assert "manage.py workergen queue work --queue %i" in worker_unit
    assert (
        "manage.py workergen schedule work"
        in (project / "deploy" / "workers" / "scheduler.service").read_text()
    )

    answers = yaml.safe_load((project / ANSWERS).read_text())
    assert {key: answers[key] for key in ("add_to", "django_app", "package_name", "broker")} == {
        "add_to": "django",
        "django_app": "accounts",
        "package_name": "config",
        "broker": "redis",
    }
    assert answers["_src_path"] and answers["_commit"].startswith("v")
    assert not (project / ".copier-answers.yml").exists()
    assert "python manage.py workergen queue work" in result.output


def before_settings(before: dict[str, bytes]) -> Path:
    import tempfile

    path = Path(tempfile.mkdtemp()) / "settings.py"
    path.write_bytes(before["config/settings.py"])
    return path


def test_a_second_run_changes_nothing_and_says_so(project: Path):
    assert run(project, *ADD, "--yes").exit_code == 0
    before = snapshot(project)

    result = run(project, *ADD, "--yes")

    assert result.exit_code == 0, result.output
    assert "Nothing to change" in result.output
    assert snapshot(project) == before


def test_declined_edits_leave_your_files_and_say_what_to_add(project: Path):
    before = snapshot(project)

    result = run(project, *ADD, input="n\nn\n")

    assert result.exit_code == 1, result.output
    after = snapshot(project)
    for name, content in before.items():
        assert after[name] == content, name
    # The diff was shown before the question, and the lines to add by hand after.
    assert "+from .celery import app as celery_app" in result.output
    assert "Edit config/settings.py? [y/N]" in result.output
    assert "config/__init__.py: add" in result.output
    assert 'INSTALLED_APPS += ["accounts", "workergen_runtime.django"]' in result.output
    # The files of its own are there: a run with --yes makes only the edits.
    assert (project / "config" / "celery.py").exists()
    done = run(project, *ADD, "--yes")
    assert done.exit_code == 0, done.output
    assert "create" not in done.output
    assert "workergen_runtime.django" in installed_apps(project)


def test_the_database_scheduler_and_results(project: Path):
    result = run(
        project, *ADD, "--scheduler", "database", "--django-results", "--lanes", "default", "--yes"
    )

    assert result.exit_code == 0, result.output
    assert installed_apps(project)[-3:] == [
        "workergen_runtime.django",
        "django_celery_beat",
        "django_celery_results",
    ]
    workers = module_values(project / "config" / "workers.py")
    assert workers["DJANGO_SCHEDULER"] == "database"
    assert workers["DJANGO_RESULTS"] is True
    assert workers["LANES"] == ("default",)
    assert "python manage.py migrate" in result.output


def test_a_celery_app_of_your_own_is_never_overwritten(project: Path):
    own = project / "config" / "celery.py"
    own.write_text("from celery import Celery\n\napp = Celery('config')\n")
    before = snapshot(project)

    result = run(project, *ADD, "--yes")

    assert result.exit_code == 1
    assert "config/celery.py is there already and is not workergen's" in result.output
    assert "changed nothing" in result.output
    assert snapshot(project) == before


def test_your_env_example_gets_the_settings_appended_and_your_conftest_stays(project: Path):
    (project / ".env.example").write_text("SECRET_KEY=change-me\n")
    (project / "conftest.py").write_text("import pytest\n")
    (project / "pyproject.toml").write_text(
        '[tool.pytest.ini_options]\nDJANGO_SETTINGS_MODULE = "config.settings"\n'
    )

    result = run(project, *ADD, "--yes")

    assert result.exit_code == 0, result.output
    env = (project / ".env.example").read_text()
    assert env.startswith("SECRET_KEY=change-me\n\n# The workers' settings")
    assert "BROKER_URL=" in env
    assert (project / "conftest.py").read_text() == "import pytest\n"
    assert 'add `pytest_plugins = ["workergen_runtime.django.testing"]`' in result.output
    assert not (project / "pytest.ini").exists()
    assert "configures pytest already" in result.output


def test_on_a_terminal_it_asks_the_questions_that_matter(
    project: Path, monkeypatch: pytest.MonkeyPatch
):
    from workergen.commands import add as add_command

    asked: dict[str, object] = {}

    def ask(question, default, validate):
        asked[question.name] = default
        return {"broker": "rabbitmq", "django_scheduler": "database"}.get(question.name, default)

    monkeypatch.setattr(add_command, "terminal_is_interactive", lambda: True)
    monkeypatch.setattr(add_command, "_ask_on_terminal", ask)

    result = run(project, "add", "--app", "accounts", "--yes")

    assert result.exit_code == 0, result.output
    assert asked == {
        "broker": "redis",
        "rabbitmq_queue_type": "classic",
        "queue_namespace": "shop",
        "lanes": "critical,default,batch",
        "django_scheduler": "crons",
        "django_results": False,
    }
    workers = module_values(project / "config" / "workers.py")
    assert (workers["BROKER"], workers["DJANGO_SCHEDULER"]) == ("rabbitmq", "database")


@pytest.mark.parametrize(
    ("settings", "expected"),
    [
        (
            "INSTALLED_APPS = [\n    'django.contrib.admin',\n    'accounts'\n]\n",
            "INSTALLED_APPS = [\n    'django.contrib.admin',\n    'accounts',\n"
            "    'workergen_runtime.django',\n]\n",
        ),
        (
            'INSTALLED_APPS = ["django.contrib.admin", "accounts"]\n',
            'INSTALLED_APPS = ["django.contrib.admin", "accounts", "workergen_runtime.django"]\n',
        ),
        (
            'INSTALLED_APPS = ("accounts.apps.AccountsConfig",)  # ours\n',
            'INSTALLED_APPS = ("accounts.apps.AccountsConfig", "workergen_runtime.django")'
            "  # ours\n",
        ),
        ("INSTALLED_APPS = []\n", 'INSTALLED_APPS = ["accounts", "workergen_runtime.django"]\n'),
        ("INSTALLED_APPS = BASE_APPS + ['accounts']\n", None),
    ],
    ids=["multi-line", "one-line", "tuple-with-appconfig", "empty", "not-a-list"],
)
def test_installed_apps_gets_what_is_missing(settings: str, expected: str | None):
    from workergen.add.django import add_installed_apps

    assert add_installed_apps(settings, ["accounts", "workergen_runtime.django"]) == expected
    if expected is not None:
        assert add_installed_apps(expected, ["accounts", "workergen_runtime.django"]) == expected


def test_installed_apps_it_cannot_extend_are_refused_with_the_line_to_add(project: Path):
    settings = project / "config" / "settings.py"
    text = settings.read_text().replace("INSTALLED_APPS = [", "INSTALLED_APPS = BASE_APPS + [")
    settings.write_text("BASE_APPS = []\n" + text)
    before = snapshot(project)

    result = run(project, *ADD, "--yes")

    assert result.exit_code == 1
    assert (
        'add by hand: INSTALLED_APPS += ["accounts", "workergen_runtime.django"]' in result.output
    )
    assert snapshot(project) == before


def test_pretend_shows_the_files_and_diffs_and_writes_nothing(project: Path):
    before = snapshot(project)

    result = run(project, *ADD, "--pretend")

    assert result.exit_code == 0, result.output
    assert "create   config/celery.py" in result.output
    assert "+    'workergen_runtime.django'," in result.output
    assert "Pretend run: nothing was written." in result.output
    assert snapshot(project) == before


def test_not_a_django_folder_is_refused_with_a_hint(tmp_path: Path):
    result = run(tmp_path, *ADD)

    assert result.exit_code == 1
    assert isinstance(result.exception, SystemExit)
    assert "is not a project workergen add knows: no manage.py here" in result.output
    assert "workergen new NAME" in result.output
    assert list(tmp_path.iterdir()) == []


def test_an_app_that_is_not_there_is_refused_listing_the_apps(project: Path):
    before = snapshot(project)

    result = run(project, "add", "--app", "billing", "--defaults", "--yes")

    assert result.exit_code == 1
    assert isinstance(result.exception, SystemExit)
    assert "'billing' is not an app of this project" in result.output
    assert "found: accounts" in result.output
    assert snapshot(project) == before


def test_data_that_contradicts_the_project_is_refused(project: Path):
    before = snapshot(project)

    result = run(project, *ADD, "--data", "package_name=billing")

    assert result.exit_code == 1
    assert isinstance(result.exception, SystemExit)
    assert "package_name is taken from the project ('config')" in result.output
    assert "--data says 'billing'" in result.output
    assert "Leave it out" in result.output
    assert snapshot(project) == before


def test_manage_py_without_settings_is_refused(project: Path):
    (project / "manage.py").write_text("print('hello')\n")

    result = run(project, *ADD)

    assert result.exit_code == 1
    assert "sets no default DJANGO_SETTINGS_MODULE" in result.output


def test_a_settings_package_the_workers_cannot_use_is_refused(tmp_path: Path):
    project = tmp_path / "shop"
    project.mkdir()
    subprocess.run(
        [sys.executable, "-m", "django", "startproject", "core", "."], cwd=project, check=True
    )
    subprocess.run(
        [sys.executable, "-m", "django", "startapp", "accounts"], cwd=project, check=True
    )
    before = snapshot(project)

    result = run(project, *ADD, "--yes")

    assert result.exit_code == 1
    assert isinstance(result.exception, SystemExit)
    assert (
        "the settings package 'core' cannot hold the workers: 'core' would shadow" in result.output
    )
    assert snapshot(project) == before


def test_help_teaches_the_command():
    result = runner.invoke(app, ["add", "--help"])

    assert result.exit_code == 0
    for text in ("manage.py", "--app", "--yes", "--scheduler", "docs/django.md", ANSWERS[:20]):
        assert text in result.output, text


def test_workergen_update_and_copier_update_in_an_added_project(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    clone = clone_repository(tmp_path / "workergen")
    monkeypatch.setenv("WORKERGEN_TEMPLATE_URL", str(clone))
    project = django_project(tmp_path / "shop")
    assert run(project, *ADD, "--yes").exit_code == 0
    git(project, "init", "-q")
    commit_all(project, "Workers added")

    # Offline, from the installed template: nothing newer.
    result = run(project, "update")
    assert result.exit_code == 0, result.output
    assert "up to date" in result.output

    # A newer template version changes a file of the added workers.
    template = clone / "template_add" / "django" / "{{package_name}}" / "workers.py.jinja"
    template.write_text(template.read_text() + "# A fix of the template.\n")
    commit_all(clone, "Template: a fix for added workers")
    version = "9.9.0"
    make_release(clone, version)
    settings = (project / "config" / "settings.py").read_bytes()

    result = run(project, "update", "--template", str(clone))

    assert result.exit_code == 0, result.output
    assert "changed  config/workers.py" in result.output
    assert (project / "config" / "workers.py").read_text().endswith("# A fix of the template.\n")
    assert (project / "config" / "settings.py").read_bytes() == settings
    assert yaml.safe_load((project / ANSWERS).read_text())["_commit"].startswith(f"v{version}")
    assert not (project / ".copier-answers.yml").exists()

    # Plain copier, with the answers file named, reads the recorded source.
    git(project, "checkout", "-q", "--", ".")
    done = subprocess.run(
        [str(BIN / "copier"), "update", "--answers-file", ANSWERS, "--defaults", "--skip-answered"],
        cwd=project,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    assert (project / "config" / "workers.py").read_text().endswith("# A fix of the template.\n")
    assert (project / "config" / "settings.py").read_bytes() == settings


# --- end to end: the added project's own tests, and a real worker on PostgreSQL ----

POSTGRES_URL = "postgresql://postgres@127.0.0.1:5432/postgres"


def require(module: str, why: str) -> None:
    """Skip (fail under CI=true) unless `module` can be imported, saying `why` it is needed."""
    import importlib.util

    try:
        found = importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:
        found = False
    if found:
        return
    reason = f"{module} is not installed: {why}"
    if IN_CI:
        pytest.fail(f"CI=true requires it: {reason}", pytrace=False)
    pytest.skip(reason)


@pytest.fixture
def postgres_database() -> Iterator[str]:
    """A PostgreSQL database of this test's own, dropped at the end."""
    require("psycopg", "the added project's database is PostgreSQL")
    require_broker("PostgreSQL", POSTGRES_URL)
    import psycopg

    name = f"workergen_add_{os.getpid()}_{secrets.token_hex(3)}"
    with psycopg.connect(POSTGRES_URL, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield name
    finally:
        with psycopg.connect(POSTGRES_URL, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            admin.execute(f'DROP DATABASE IF EXISTS "test_{name}" WITH (FORCE)')


COUNT_USERS = """
    def handle(self, out: str) -> None:
        from pathlib import Path

        from django.contrib.auth.models import User

        Path(out).write_text(",".join(user.username for user in User.objects.order_by("id")))
"""


def manage(project: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done


def test_an_added_project_tests_itself_and_its_worker_reads_the_orm(
    tmp_path: Path, redis_url: str, postgres_database: str
):
    require("workergen_runtime.django", "the runtime's Django integration (the runtime's side)")
    require("pytest_django", "the added project tests itself with pytest-django")
    namespace = f"wgadd{secrets.token_hex(4)}"
    project = django_project(tmp_path / "shop")
    result = run(project, *ADD, "--namespace", namespace, "--yes")
    assert result.exit_code == 0, result.output
    # The project's own choices: PostgreSQL, and the broker in .env (as docs/django.md says).
    with (project / "config" / "settings.py").open("a") as settings:
        settings.write(
            "\nDATABASES = {'default': {'ENGINE': 'django.db.backends.postgresql', "
            f"'NAME': '{postgres_database}', 'USER': 'postgres', 'HOST': '127.0.0.1', "
            "'PORT': '5432'}}\n"
        )
    (project / ".env").write_text(
        f"BROKER_URL={redis_url}\nLOCK_URL={redis_url}\nQUEUE_NAMESPACE={namespace}\n"
    )
    made = run(project, "make:job", "CountUsers", "--app", "accounts")
    assert made.exit_code == 0, made.output
    job_file = project / "accounts" / "jobs" / "count_users.py"
    assert job_file.is_file()

    # The project's own test suite passes as it is, with the job's test.
    tests = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert tests.returncode == 0, tests.stdout + tests.stderr
    assert "passed" in tests.stdout

    # The job reads the ORM; a real worker runs it.
    source = job_file.read_text()
    handle = source.index("    def handle(")
    job_file.write_text(source[:handle] + COUNT_USERS.lstrip("\n"))
    manage(project, "migrate", "--verbosity", "0")
    manage(
        project,
        "shell",
        "-c",
        "from django.contrib.auth.models import User; "
        "User.objects.create(username='ada'); User.objects.create(username='grace')",
    )
    out = tmp_path / "users.txt"
    pidfile = tmp_path / "worker.pid"
    log = (tmp_path / "worker.log").open("w")
    worker = subprocess.Popen(
        [
            sys.executable,
            "manage.py",
            "workergen",
            "queue",
            "work",
            "--pool",
            "solo",
            "--pidfile",
            str(pidfile),
        ],
        cwd=project,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        manage(
            project,
            "workergen",
            "queue",
            "dispatch",
            "accounts.count_users",
            "--args",
            f'["{out}"]',
        )
        deadline = time.monotonic() + 60
        while not out.exists() and worker.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        assert out.exists(), "the job did not run:\n" + (tmp_path / "worker.log").read_text()
        assert out.read_text() == "ada,grace"
    finally:
        worker.terminate()
        try:
            worker.wait(timeout=30)
        except subprocess.TimeoutExpired:
            worker.kill()
            worker.wait()
        log.close()
        delete_redis_keys(redis_url, [namespace])
