"""The runtime's Django tests, against the sample project under sample/ and real services.

The sample project (sample/config/workers.py) takes its broker from the environment:

    WORKERGEN_TEST_BROKER      redis (default) or rabbitmq
    WORKERGEN_TEST_DJANGO_DB   the PostgreSQL database the tests create and drop
                               (default: workergen_django_sample)

PostgreSQL (127.0.0.1:5432, user postgres) and the broker must be reachable: a test
skips, with the reason, when one is not, and fails under CI=true. Queues live under
namespaces of this run's own, removed at the end; Redis keys in database 11.

The tests that need a worker share one (fixture `worker`, started once); a test
whose worker runs with other settings starts its own. The tests whose outcome no
broker can change (scaffolding, the CLI's messages, reading the database) run in
the Redis run only: mark them `broker_independent`.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

# The repository's test helpers: services required, a namespace's queues and policies removed.
sys.path.append(str(Path(__file__).resolve().parents[3] / "tests"))
from workers import SHARED_WORKER, Process, all_stopped, start, wait_started, worker_args

from support.brokers import RABBITMQ_URL, REDIS_URL, require_broker
from support.cleanup import (
    delete_rabbitmq_entities,
    delete_rabbitmq_policies,
    delete_redis_keys,
)

BROKER = os.environ.setdefault("WORKERGEN_TEST_BROKER", "redis")
POSTGRES_URL = "postgresql://postgres@127.0.0.1:5432/postgres"
NAMESPACE = f"djsample{os.getpid()}"
# The lanes of a worker that keeps results in the database: its own, so the shared
# worker (which keeps none) never takes its jobs.
RESULTS_NAMESPACE = f"djresults{os.getpid()}"

# Scaffolding, the CLI's own messages, what is read from the database: the same on
# every broker, so run once, in the Redis run (tests/test_runtime_django.py checks it).
broker_independent = pytest.mark.skipif(
    BROKER != "redis", reason="broker-independent: runs in the redis run"
)

# Read by the sample project's workers, here and in the workers the tests start.
os.environ.update(
    {
        "BROKER_URL": REDIS_URL if BROKER == "redis" else RABBITMQ_URL,
        "LOCK_URL": REDIS_URL,
        "QUEUE_NAMESPACE": NAMESPACE,
        "LOG_FORMAT": "text",
    }
)
for _variable in ("RESULT_BACKEND_URL", "METRICS_PORT"):
    os.environ.pop(_variable, None)


def pytest_report_header() -> str:
    from django.conf import settings

    return (
        f"django sample project: broker {BROKER}, "
        f"database {settings.DATABASES['default']['NAME']}, namespace {NAMESPACE}"
    )


@pytest.fixture(scope="session")
def django_db_setup(django_db_blocker: pytest.FixtureRequest) -> Iterator[None]:
    """The sample project's own database (not pytest-django's test_ copy): the workers
    the tests start use it too. Created, migrated, and dropped at the end."""
    import psycopg
    from django.conf import settings
    from django.core.management import call_command
    from django.db import connections

    require_broker("PostgreSQL", POSTGRES_URL)
    require_broker(BROKER, REDIS_URL if BROKER == "redis" else RABBITMQ_URL)
    name = settings.DATABASES["default"]["NAME"]
    with psycopg.connect(POSTGRES_URL, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        with django_db_blocker.unblock():
            call_command("migrate", verbosity=0)
        yield
    finally:
        all_stopped()
        connections.close_all()
        with psycopg.connect(POSTGRES_URL, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@dataclass(frozen=True)
class SharedWorker:
    """The session's worker: every lane, one process, named `hostname`@host."""

    hostname: str
    metrics_port: int


# The shared worker while it runs, and the last test (node id) that uses it.
_shared: list[Process] = []
_last_user: list[str] = []


@pytest.hookimpl(trylast=True)  # after pytest-django put the database tests first
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    users = [item.nodeid for item in items if "worker" in getattr(item, "fixturenames", ())]
    _last_user[:] = users[-1:]


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item: pytest.Item) -> Iterator[None]:
    yield
    # No test after this one uses the shared worker: it stops while the others run.
    if _shared and [item.nodeid] == _last_user:
        _shared[0].stop()


@pytest.fixture(scope="session")
def worker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SharedWorker]:
    """One worker for the tests that wait on what they sent (a row, a task id, a count
    that went up), started when the first of them needs it, asked to stop after the
    last of them, and waited for at the end."""
    from support.operations import free_port

    port = free_port()
    shared = start(
        tmp_path_factory.mktemp("worker"),
        *worker_args("shared"),
        env={"METRICS_PORT": str(port)},
        name="shared",
    )
    # A worker still stopping (the priority test's) must not take the jobs sent to this one.
    all_stopped()
    wait_started(shared)
    SHARED_WORKER.append(True)
    _shared.append(shared)
    try:
        yield SharedWorker("shared", port)
    finally:
        _shared.clear()
        shared.stopped()


@pytest.fixture(scope="session", autouse=True)
def _queues_removed_at_the_end() -> Iterator[None]:
    yield
    all_stopped()
    remove_queues()


def remove_queues() -> None:
    """Every queue, exchange, policy and key of this run's namespaces.

    Independent of one another: the RabbitMQ ones (a rabbitmqctl node each) at once.
    """
    namespaces = [NAMESPACE, RESULTS_NAMESPACE]
    with ThreadPoolExecutor(3) as pool:
        done = [pool.submit(delete_redis_keys, REDIS_URL, namespaces)]
        if BROKER == "rabbitmq":
            done.append(pool.submit(delete_rabbitmq_entities, RABBITMQ_URL, namespaces))
            done.append(pool.submit(delete_rabbitmq_policies, namespaces))
    for future in done:
        future.result()
