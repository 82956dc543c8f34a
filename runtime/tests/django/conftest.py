"""The runtime's Django tests, against the sample project under sample/ and real services.

The sample project (sample/config/workers.py) takes its broker from the environment:

    WORKERGEN_TEST_BROKER      redis (default) or rabbitmq
    WORKERGEN_TEST_DJANGO_DB   the PostgreSQL database the tests create and drop
                               (default: workergen_django_sample)

PostgreSQL (127.0.0.1:5432, user postgres) and the broker must be reachable: a test
skips, with the reason, when one is not, and fails under CI=true. Queues live under
a namespace of this run's own, removed at the end; Redis keys in database 11.
"""

from __future__ import annotations

import os
import socket
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest

# The repository's test helpers: removing a namespace's RabbitMQ queues and policies.
sys.path.append(str(Path(__file__).resolve().parents[3] / "tests"))
from support.cleanup import (
    delete_rabbitmq_entities,
    delete_rabbitmq_policies,
    delete_redis_keys,
)

IN_CI = os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")
BROKER = os.environ.setdefault("WORKERGEN_TEST_BROKER", "redis")
REDIS_URL = os.environ.get("WORKERGEN_TEST_REDIS_URL", "redis://127.0.0.1:6379/11")
RABBITMQ_URL = os.environ.get("WORKERGEN_TEST_RABBITMQ_URL", "amqp://guest:guest@127.0.0.1:5672//")
POSTGRES_URL = "postgresql://postgres@127.0.0.1:5432/postgres"
NAMESPACE = f"djsample{os.getpid()}"

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


def reachable(url: str) -> bool:
    parts = urlsplit(url)
    deadline = time.monotonic() + (60 if IN_CI else 1)
    while True:
        try:
            with socket.create_connection((parts.hostname, parts.port), 1):
                return True
        except OSError:
            if time.monotonic() > deadline:
                return False
            time.sleep(1)


def require(name: str, url: str) -> None:
    """Skip (fail under CI=true) unless the service at `url` answers."""
    if reachable(url):
        return
    reason = f"{name} is not reachable at {urlsplit(url).netloc}"
    if IN_CI:
        pytest.fail(f"CI=true requires {name}: {reason}", pytrace=False)
    pytest.skip(reason)


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

    require("PostgreSQL", POSTGRES_URL)
    require(BROKER, REDIS_URL if BROKER == "redis" else RABBITMQ_URL)
    name = settings.DATABASES["default"]["NAME"]
    with psycopg.connect(POSTGRES_URL, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        with django_db_blocker.unblock():
            call_command("migrate", verbosity=0)
        yield
    finally:
        connections.close_all()
        with psycopg.connect(POSTGRES_URL, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(scope="session", autouse=True)
def _queues_removed_at_the_end() -> Iterator[None]:
    yield
    remove_queues()


def remove_queues() -> None:
    """Every queue, exchange, policy and key of this run's namespace."""
    delete_redis_keys(REDIS_URL, [NAMESPACE])
    if BROKER == "rabbitmq":
        delete_rabbitmq_entities(RABBITMQ_URL, [NAMESPACE])
        delete_rabbitmq_policies([NAMESPACE])
