"""The answers of the sample project the runtime's tests run against.

As `workergen new --name billing` writes them, but for the broker and the other
answers the runtime behaves differently on: those come from the environment the
tests run in (runtime/tests/conftest.py says which variables), so that one
sample project stands for the projects of every broker.
"""

import os


def _answer(variable: str, default: str, choices: tuple[str, ...]) -> str:
    value = os.environ.get(variable, default)
    if value not in choices:
        raise ValueError(f"{variable}={value!r}: expected one of {', '.join(choices)}")
    return value


PACKAGE = "billing"
PROJECT_NAME = "billing"
BROKER = _answer("WORKERGEN_TEST_BROKER", "redis", ("redis", "rabbitmq", "sqs"))
LANES: tuple[str, ...] = ("critical", "default", "batch")
# A generated project's default is its package name; empty is the other case: no prefix.
DEFAULT_NAMESPACE = os.environ.get("WORKERGEN_TEST_NAMESPACE", "billing")
RESULT_BACKEND = "none"
SQS_REGION = "us-east-1"
# RabbitMQ queue type of the lanes: "classic" or "quorum" (other brokers: "classic").
QUEUE_TYPE = _answer("WORKERGEN_TEST_QUEUE_TYPE", "classic", ("classic", "quorum"))
if BROKER != "rabbitmq":
    QUEUE_TYPE = "classic"
# Whether the project has the HTTP front door (`http serve`).
HTTP_API = _answer("WORKERGEN_TEST_HTTP_API", "false", ("true", "false")) == "true"
