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
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

# The repository's test helpers: services required, a namespace's queues and policies removed.
sys.path.append(str(Path(__file__).resolve().parents[3] / "tests"))
from support.brokers import RABBITMQ_URL, REDIS_URL, require_broker
from support.cleanup import (
    delete_rabbitmq_entities,
    delete_rabbitmq_policies,
    delete_redis_keys,
)

BROKER = os.environ.setdefault("WORKERGEN_TEST_BROKER", "redis")
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
