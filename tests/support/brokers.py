"""Which brokers the suite can reach; under CI=true a missing broker fails, never skips."""

from __future__ import annotations

import os
import shutil
import socket
import time
from typing import Any
from urllib.parse import urlsplit

import pytest

IN_CI = os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")

# A database of its own, so the suite's keys never mix with db 0's.
REDIS_URL = os.environ.get("WORKERGEN_TEST_REDIS_URL", "redis://127.0.0.1:6379/11")
RABBITMQ_URL = os.environ.get("WORKERGEN_TEST_RABBITMQ_URL", "amqp://guest:guest@127.0.0.1:5672//")

# Tests that stop, kill or restart a broker run under CI=true, or when asked for.
BROKER_RESTARTS = IN_CI or os.environ.get("WORKERGEN_TEST_BROKER_RESTARTS", "") == "1"

START_HINTS = {
    "redis": "start it with: redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save ''",
    "rabbitmq": "start it with: rabbitmq-server -detached",
    "PostgreSQL": "start it with: pg_ctlcluster --skip-systemctl-redirect <version> main start",
}


def port_open(url: str, timeout: float = 1.0) -> bool:
    """True when something listens at the URL's host and port."""
    parts = urlsplit(url)
    try:
        with socket.create_connection((parts.hostname or "127.0.0.1", parts.port), timeout):
            return True
    except OSError:
        return False


def require_broker(name: str, url: str) -> str:
    """Return the URL when the broker answers; skip (or fail under CI=true) otherwise.

    Under CI=true it waits a while first: a test may be restarting the broker.
    """
    deadline = time.monotonic() + (90 if IN_CI else 2)
    while True:
        if port_open(url):
            return url
        if time.monotonic() > deadline:
            break
        time.sleep(1)
    reason = f"{name} is not reachable at {url}; {START_HINTS.get(name, '')}"
    if IN_CI:
        pytest.fail(f"CI=true requires every broker and database: {reason}", pytrace=False)
    pytest.skip(reason)


def require_rabbitmqctl(why: str) -> str:
    """The path of rabbitmqctl; skip without it (fail under CI=true), saying `why` it is needed."""
    ctl = shutil.which("rabbitmqctl")
    if ctl is not None:
        return ctl
    if IN_CI:
        pytest.fail(f"CI=true needs rabbitmqctl on PATH {why}", pytrace=False)
    pytest.skip(f"rabbitmqctl is not on PATH; needed {why}")


# Whether the running test carries the `broker_restarts` mark (tests/conftest.py sets it).
RUNNING_TEST = {"marked_broker_restarts": False}


def require_broker_restarts() -> None:
    """Skip a test that restarts or kills a broker unless CI=true or the opt-in is set.

    Such a test must carry `@pytest.mark.broker_restarts`: scripts/test.sh runs those
    after the others, one at a time, so no other test loses its broker mid-run.
    """
    if not RUNNING_TEST["marked_broker_restarts"]:
        pytest.fail(
            "this test kills or restarts a broker: mark it @pytest.mark.broker_restarts "
            "so scripts/test.sh runs it in the stage of its own",
            pytrace=False,
        )
    if not BROKER_RESTARTS:
        pytest.skip(
            "restarts a broker: runs under CI=true or with WORKERGEN_TEST_BROKER_RESTARTS=1"
        )


def sqs_client(url: str) -> Any:
    """A boto3 SQS client for a local SQS given as the project's BROKER_URL."""
    import boto3

    parts = urlsplit(url)
    return boto3.client(
        "sqs",
        region_name="us-east-1",
        endpoint_url=f"http://{parts.hostname}:{parts.port}",
        aws_access_key_id=parts.username,
        aws_secret_access_key=parts.password,
    )
