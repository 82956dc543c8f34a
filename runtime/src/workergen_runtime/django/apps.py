"""The Django app "workergen_runtime.django": the `workergen` management command."""

from __future__ import annotations

from django.apps import AppConfig


class WorkergenConfig(AppConfig):
    name = "workergen_runtime.django"
    label = "workergen"
    verbose_name = "Workers"
