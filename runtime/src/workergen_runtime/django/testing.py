"""The pytest plugin of Django projects with workers.

A project enables it in its conftest.py: `pytest_plugins = ["workergen_runtime.django.testing"]`.

Fixture `run_jobs_eagerly`: a job dispatched in the test runs at once, in the test's
process, and its error is raised there. Dispatched inside `transaction.atomic()` it
runs when the transaction commits, as in production: in a `django_db` test (one
transaction that never commits) wrap the code in pytest-django's
`django_capture_on_commit_callbacks(execute=True)`.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

EAGER = {"task_always_eager": True, "task_eager_propagates": True, "task_store_eager_result": False}


@pytest.fixture
def run_jobs_eagerly() -> Iterator[Any]:
    """Run every job dispatched during the test in the test itself; yields the Celery app."""
    from workergen_runtime.celery_app import app

    saved = {name: app.conf.get(name) for name in EAGER}
    app.conf.update(EAGER)
    try:
        yield app
    finally:
        app.conf.update(saved)
