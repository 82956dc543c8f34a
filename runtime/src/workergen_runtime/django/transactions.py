"""Dispatch inside a Django transaction: the message is sent once it commits."""

from __future__ import annotations

from typing import Any

from celery.utils import uuid


def send_on_commit(
    task: Any, args: tuple[Any, ...], kwargs: dict[str, Any], options: dict[str, Any]
) -> Any:
    """Inside `transaction.atomic()` (default database): send on commit, return its result.

    Outside one, None: the caller sends at once. A rolled-back transaction sends nothing,
    so a job never runs for a row that was never committed.
    """
    from django.db import transaction

    if not transaction.get_connection().in_atomic_block:
        return None
    from workergen_runtime.dispatch import broker_guard

    options = {**options, "task_id": options.get("task_id") or uuid()}

    def publish() -> None:
        with broker_guard(task.app.settings):
            task.apply_async(args=args, kwargs=kwargs, **options)

    transaction.on_commit(publish)
    return task.AsyncResult(options["task_id"])
