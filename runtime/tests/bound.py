"""What the tests run against: the sample project, its broker, and the tests that need one."""

from pathlib import Path

import pytest

from workergen_runtime import project

# The sample project's root: subprocesses (`python -m billing ...`) import it from here.
PROJECT_ROOT = Path(__file__).resolve().parent / "sample"
PACKAGE = project.PACKAGE
BROKER = project.BROKER
NAMES = {"redis": "Redis", "rabbitmq": "RabbitMQ", "sqs": "SQS"}
# A URL of the project's broker where nothing listens.
UNREACHABLE_BROKER = {
    "redis": "redis://127.0.0.1:9/0",
    "rabbitmq": "amqp://guest:guest@127.0.0.1:9//",
    "sqs": "sqs://key:secret@127.0.0.1:9",
}[BROKER]

# The run with every answer at its default.
DEFAULT_RUN = (
    BROKER == "redis"
    and project.QUEUE_TYPE == "classic"
    and not project.HTTP_API
    and project.DEFAULT_NAMESPACE == "billing"
)
# A test no broker or answer can change: it runs once, in the default run, and the
# others skip it (tests/test_runtime_suite.py checks both).
answer_independent = pytest.mark.skipif(
    not DEFAULT_RUN,
    reason="answer-independent: the same whatever the broker and answers; "
    "it runs in the default run (redis, default answers)",
)


def only_on(*brokers: str, because: str = "") -> pytest.MarkDecorator:
    """Skip the test unless the project's broker is one of `brokers`."""
    reason = " or ".join(NAMES[broker] for broker in brokers) + " only"
    if because:
        reason += f" ({because})"
    return pytest.mark.skipif(
        BROKER not in brokers, reason=f"{reason}; this run's broker is {NAMES[BROKER]}"
    )


# Code for a test's own process that sends to UNREACHABLE_BROKER: the dispatch retries as
# often as the runtime's policy says, without the pauses between (1.5 s in all) that only
# delay its answer. test_cli.py checks that a dispatch to a dead broker fails fast as it is.
RETRIES_WITHOUT_PAUSES = (
    "from workergen_runtime.celery_app import app as _celery\n"
    "_celery.conf.task_publish_retry_policy = {\n"
    "    **_celery.conf.task_publish_retry_policy, 'interval_step': 0, 'interval_max': 0\n"
    "}\n"
)


# RabbitMQ holds a message unacknowledged for as long as it takes: it has no visibility
# timeout, and no setting is checked against one.
with_a_visibility_timeout = only_on("redis", "sqs", because="RabbitMQ has no visibility timeout")
