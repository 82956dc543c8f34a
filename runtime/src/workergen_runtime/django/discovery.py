"""Where a Django project's jobs and crons are: its installed apps' packages."""

from __future__ import annotations

import importlib.util
from collections.abc import Iterable

from workergen_runtime import project


def django_packages(subpackages: Iterable[str]) -> list[str]:
    """`<app>.jobs` and `<app>.crons` of every installed app, and `<settings package>.crons`.

    Those that exist only: an app need not have jobs. Django is set up first if it
    is not yet (a worker started by `celery -A <settings package>` may ask before).
    """
    import django
    from django.apps import apps

    if not apps.ready:
        django.setup()
    apps_names = [config.name for config in apps.get_app_configs()]
    candidates = [f"{app}.{sub}" for app in apps_names for sub in subpackages]
    if project.PACKAGE not in apps_names:
        candidates.append(f"{project.PACKAGE}.crons")
    return [name for name in candidates if importlib.util.find_spec(name) is not None]
