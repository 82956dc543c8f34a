"""The workers' answers, as `workergen add` writes them, but for those the tests choose.

The broker, the scheduler and the result backend come from the environment the
tests run in (runtime/tests/django/conftest.py), so that one sample project
stands for the Django projects of every broker.
"""

import os

PACKAGE = "config"
PROJECT_NAME = "sample"
BROKER = os.environ.get("WORKERGEN_TEST_BROKER", "redis")
LANES: tuple[str, ...] = ("default", "critical")
DEFAULT_NAMESPACE = "sample"
RESULT_BACKEND = "none"
SQS_REGION = "us-east-1"
QUEUE_TYPE = "classic"
HTTP_API = False
FRAMEWORK = "django"
DJANGO_SCHEDULER = os.environ.get("WORKERGEN_TEST_DJANGO_SCHEDULER", "crons")
DJANGO_RESULTS = os.environ.get("WORKERGEN_TEST_DJANGO_RESULTS", "false") == "true"
