"""Suite-wide fixtures: the template under test, rendered projects, and brokers."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from support.brokers import (
    IN_CI,
    RABBITMQ_URL,
    REDIS_URL,
    RUNNING_TEST,
    port_open,
    require_broker,
)
from support.cleanup import (
    delete_rabbitmq_entities,
    delete_rabbitmq_policies,
    delete_redis_keys,
)
from support.projects import CREATED_NAMESPACES

REPO_ROOT = Path(__file__).resolve().parents[1]


def pytest_configure(config: pytest.Config) -> None:
    # pytest-copie resolves --template against the working directory; the
    # template is this repository, wherever pytest is started from.
    config.option.template = str(REPO_ROOT)


# The modules whose tests take a minute or more, longest first. They start first, so
# the parallel run does not end with one of them running alone while the other
# workers have nothing left (tests never depend on their order).
LONGEST_FIRST = (
    "test_runtime_django.py",
    "test_runtime_suite.py",
    "test_e2e_scheduling.py",
    "test_fresh_venv.py",
    "test_dlq_volume.py",
    "test_lane_capacity.py",
    "test_install.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    def rank(item: pytest.Item) -> int:
        name = item.path.name
        return LONGEST_FIRST.index(name) if name in LONGEST_FIRST else len(LONGEST_FIRST)

    items.sort(key=rank)  # stable: the order within each module stays


RenderFn = Callable[..., Path]


@pytest.fixture(scope="session", autouse=True)
def _a_cache_of_the_sessions_own(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """workergen's cache (compiled templates) starts empty and is the session's, not the user's."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.mktemp("cache")))
        yield


@pytest.fixture(scope="session", autouse=True)
def _delete_what_the_suite_created() -> Iterator[None]:
    """At the end of the session, delete every queue, exchange, policy and key of its namespaces."""
    yield
    delete_redis_keys(REDIS_URL, CREATED_NAMESPACES)
    delete_rabbitmq_entities(RABBITMQ_URL, CREATED_NAMESPACES)
    delete_rabbitmq_policies(CREATED_NAMESPACES)


@pytest.fixture(autouse=True)
def _whether_the_test_may_restart_a_broker(request: pytest.FixtureRequest) -> None:
    """Tell require_broker_restarts whether this test is in the stage that may."""
    marked = request.node.get_closest_marker("broker_restarts") is not None
    RUNNING_TEST["marked_broker_restarts"] = marked


@pytest.fixture(scope="session")
def render(copie_session: Any) -> RenderFn:
    """Render the template once per distinct set of answers in a session."""
    cache: dict[tuple[tuple[str, Any], ...], Path] = {}

    def _render(**answers: Any) -> Path:
        answers.setdefault("project_name", "billing")
        key = tuple(sorted(answers.items()))
        if key not in cache:
            result = copie_session.copy(extra_answers=answers)
            # pytest-copie turns any exception into exit_code -1: show the real one.
            assert result.exception is None, repr(result.exception)
            assert result.exit_code == 0
            cache[key] = result.project_dir
        return cache[key]

    return _render


@pytest.fixture(scope="session")
def redis_url() -> str:
    return require_broker("redis", REDIS_URL)


@pytest.fixture(scope="session")
def rabbitmq_url() -> str:
    return require_broker("rabbitmq", RABBITMQ_URL)


@pytest.fixture(scope="session")
def sqs_url() -> Iterator[str]:
    """A local SQS (moto in server mode) on loopback, for the whole session."""
    try:
        from moto.server import ThreadedMotoServer
    except ImportError as exc:
        if IN_CI:
            pytest.fail(f"CI=true requires SQS: moto[server] is not installed ({exc})")
        pytest.skip(f"moto[server] is not installed ({exc}); pip install -e '.[dev]'")
    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    _speed_up_moto_with_thousands_of_messages()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        port = server._server.server_port
        url = f"sqs://testing:testing@127.0.0.1:{port}"
        if not port_open(url, timeout=5):
            pytest.fail(f"moto server did not listen on 127.0.0.1:{port}")
        yield url
    finally:
        server.stop()


def _speed_up_moto_with_thousands_of_messages() -> None:
    """Make moto's SQS cost linear, not quadratic, in the messages of a queue.

    moto 5 scans the whole queue on every send and every message it hands out
    (send reads all queue attributes, message counts included; receive checks
    each message's retention period the same way), and each scan reads the
    clock through datetime arithmetic per message: sending and listing 2,000
    dead letters took about 8 minutes. Here the clock is read with time.time()
    and retention from the queue's own attribute: the same values and the same
    decisions, at a fraction of the cost; nothing else of the server changes.
    """
    from moto.sqs import models

    slow_seconds, slow_millis = models.unix_time, models.unix_time_millis

    def seconds(dt: Any = None) -> float:
        return time.time() if dt is None else slow_seconds(dt)

    def millis(dt: Any = None) -> float:
        return time.time() * 1000.0 if dt is None else slow_millis(dt)

    def within_retention(self: models.SQSBackend, queue_name: str, message: Any) -> bool:
        period = float(self.get_queue(queue_name).message_retention_period)
        return period + message.sent_timestamp / 1000 > seconds()

    models.unix_time, models.unix_time_millis = seconds, millis
    models.SQSBackend.is_message_valid_based_on_retention_period = within_retention


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """An empty folder where the jobs of a test leave their marker files."""
    path = tmp_path / "done"
    path.mkdir()
    return path
