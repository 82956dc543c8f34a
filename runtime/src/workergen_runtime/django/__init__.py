"""Workers in an existing Django project: the runtime serves its settings package.

The project's `<settings package>/celery.py` calls `setup(workers)`, where
`workers.py` holds the same answers as a generated project's `project.py`
plus FRAMEWORK = "django", DJANGO_SCHEDULER and DJANGO_RESULTS. Celery's own
Django fixup (celery.fixups.django) closes the database connections around
each job; the app "workergen_runtime.django" adds `manage.py workergen ...`.
"""

from __future__ import annotations

import os
import sys
from types import ModuleType
from typing import Any

from workergen_runtime import project
from workergen_runtime.errors import ConfigurationError


def setup(answers: ModuleType) -> Any:
    """Bind the Django project `answers` names and return its Celery app.

    `answers` is `<settings package>/workers.py`; DJANGO_SETTINGS_MODULE defaults
    to `<settings package>.settings`, as manage.py sets it.
    """
    if getattr(answers, "FRAMEWORK", None) != "django":
        raise ConfigurationError(
            f"{answers.__name__} does not say FRAMEWORK = 'django': "
            "workergen_runtime.django.setup serves the workers of a Django project."
        )
    # Celery installs its Django fixup when the app is made with DJANGO_SETTINGS_MODULE set;
    # made before it was set (the runtime imported first), the app gets it here.
    made_without_it = (
        "workergen_runtime.celery_app" in sys.modules and "DJANGO_SETTINGS_MODULE" not in os.environ
    )
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", f"{answers.PACKAGE}.settings")
    project.bind(answers)
    from workergen_runtime.celery_app import app

    if made_without_it:
        from celery.fixups.django import fixup

        fixup(app)
    if project.DJANGO_RESULTS:
        # Whenever the app's configuration was read, results go to the database now.
        from workergen_runtime.config import result_config

        app.conf.update(result_config(app.settings.effective_result_backend))
    return app
