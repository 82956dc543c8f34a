"""The runtime's tests, run against the sample project under sample/, for one broker.

A process serves one project, and the runtime behaves by the project's answers:
the sample project (sample/billing/project.py) takes those that matter from
the environment, so one run covers one combination of them:

    WORKERGEN_TEST_BROKER      redis (default), rabbitmq or sqs
    WORKERGEN_TEST_QUEUE_TYPE  classic (default) or quorum: the RabbitMQ lanes
    WORKERGEN_TEST_HTTP_API    false (default) or true: the HTTP front door
    WORKERGEN_TEST_NAMESPACE   the default queue namespace: billing (default), or empty

A test that holds for some of them only is skipped, with the reason, on the
others; the repository's tests/test_runtime_suite.py runs every combination.
A test marked `answer_independent` (bound.py) cannot depend on any of them (it
reads no broker, namespace, lane queue, HTTP front door, worker or dispatch): it
runs in the default run only (no variable set) and is skipped, saying so, in the others.
The environment is the repository's: the runtime with all its extras.

And the tests read no settings from the developer's shell or `.env`: a developer
who ran a worker may have BROKER_URL, QUEUE_NAMESPACE, LOG_FORMAT ... exported;
the tests start from the project's defaults all the same, and a test that needs
a setting sets it itself (monkeypatch.setenv, or Settings(...)).
"""

import os
import tempfile
from collections.abc import Iterator
from contextlib import chdir

# First: importing the sample project's package binds the worker runtime to it.
import billing  # noqa: F401
import pytest

# isort: split
from workergen_runtime import project
from workergen_runtime.celery_app import app
from workergen_runtime.ops.http_api import HttpSettings
from workergen_runtime.settings import Settings, get_settings

# django/ runs on its own, with its pytest.ini and Django sample: tests/test_runtime_django.py.
collect_ignore = ["django"]

# The variables the settings are read from; pydantic-settings reads them in any case.
SETTING_VARIABLES = frozenset(
    (settings.model_config.get("env_prefix") or "").lower() + name
    for settings in (Settings, HttpSettings)
    for name in settings.model_fields
)


def pytest_report_header() -> str:
    return (
        f"sample project: broker {project.BROKER}, queue type {project.QUEUE_TYPE}, "
        f"http api {project.HTTP_API}, namespace {project.DEFAULT_NAMESPACE!r}"
    )


def pytest_configure(config: pytest.Config) -> None:
    # Before any test module is imported: subprocesses inherit the environment.
    for name in [name for name in os.environ if name.lower() in SETTING_VARIABLES]:
        del os.environ[name]
    # The app reads its settings once, on first use, which may be while a module
    # is imported (@job reads the retry defaults): that first read is made here,
    # in a folder without .env.
    with tempfile.TemporaryDirectory() as empty, chdir(empty):
        assert app.settings == Settings(_env_file=None)
    get_settings.cache_clear()


@pytest.fixture(autouse=True)
def _settings_from_the_defaults(
    monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[None]:
    # A folder without .env, and no settings read by an earlier test.
    monkeypatch.chdir(tmp_path_factory.mktemp("cwd"))
    get_settings.cache_clear()
    yield
    get_settings.cache_clear()
