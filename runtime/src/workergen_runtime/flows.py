"""Flows: jobs composed with Celery's canvas, started through broker_guard.

Every job is a Celery task, so `SomeJob.s(...)` is a signature and Celery's
`chain`, `group` and `chord` compose them; each step runs on its own job's lane.
`start_flow` only adds what the project promises of a dispatch: a broker that is
down raises QueueUnavailableError, and a chord without a result backend is
refused before anything is queued (its callback waits on the members' results).
"""

from __future__ import annotations

from typing import Any

from celery import chain, chord, group
from celery.canvas import Signature, _chain, _chord
from celery.result import AsyncResult

from workergen_runtime.dispatch import broker_guard
from workergen_runtime.errors import ProjectError
from workergen_runtime.settings import get_settings

__all__ = ["chain", "chord", "group", "start_flow"]


class FlowNeedsResultsError(ProjectError):
    """A chord was started in a project that keeps no results."""

    def __init__(self) -> None:
        super().__init__(
            "A chord's callback waits on its members' results, and this project keeps none. "
            "Set RESULT_BACKEND_URL (e.g. redis://localhost:6379/1), or use a chain or a group."
        )


def contains_chord(flow: Signature) -> bool:
    """Whether a chord is anywhere in the flow (a chain of a group and a job is one too)."""
    if isinstance(flow, _chord):
        return True
    if isinstance(flow, _chain):
        tasks = list(flow.tasks)
        if any(isinstance(a, group) for a in tasks[:-1]):
            return True
        return any(contains_chord(task) for task in tasks)
    if isinstance(flow, group):
        return any(contains_chord(task) for task in flow.tasks)
    return False


def start_flow(flow: Signature, **options: Any) -> AsyncResult:
    """Queue a flow (its first steps); returns the result of its last step."""
    if get_settings().effective_result_backend is None and contains_chord(flow):
        raise FlowNeedsResultsError()
    with broker_guard():
        return flow.apply_async(**options)
