"""The job that runs Django's `@task` functions, where TASKS names the worker's backend.

A worker imports every installed app's jobs: this one registers the job
(workergen_runtime.django.tasks) only for a project that queues tasks with it,
so a project without Django's Tasks framework installed starts as before.
"""

from django.conf import settings

BACKEND = "workergen_runtime.django.tasks.WorkergenBackend"

if any(
    isinstance(options, dict) and options.get("BACKEND") == BACKEND
    for options in (getattr(settings, "TASKS", None) or {}).values()
):
    from workergen_runtime.django import tasks  # noqa: F401
