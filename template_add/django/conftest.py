"""pytest set-up: the workers' test helpers (fixture `run_jobs_eagerly`, docs/django.md)."""

pytest_plugins = ["workergen_runtime.django.testing"]
