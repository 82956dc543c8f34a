"""The project's Celery app, for Celery's own tools: `celery -A <package>.app inspect ping`.

Importing the package first binds the worker runtime to this project (see __init__.py).
"""

from workergen_runtime.celery_app import app

__all__ = ["app"]
