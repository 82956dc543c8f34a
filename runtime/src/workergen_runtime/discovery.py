"""Find the modules that define jobs and crons: nothing is listed by hand."""

from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path
from types import ModuleType

from workergen_runtime import project
from workergen_runtime.errors import ConfigurationError, JobImportError

DISCOVERED_PACKAGES = ("jobs", "crons")


def _import(name: str) -> ModuleType:
    """Import a job or cron module; any failure becomes one message naming the module.

    Except a bad setting, met by whatever module first reads the settings (the app
    does, when a job module imports it): the setting is the cause, not that module.
    """
    try:
        return importlib.import_module(name)
    except (JobImportError, ConfigurationError):
        raise
    except Exception as error:  # a module may fail in any way; say which one and how
        raise JobImportError(module=name, error=error) from error


def _walk(paths: list[str], prefix: str, found: list[str]) -> None:
    # Sub-packages are walked as folders, not imported: listing never runs a job's code.
    for info in pkgutil.iter_modules(paths, prefix):
        last = info.name.rsplit(".", 1)[-1]
        if not last.startswith("_"):
            found.append(info.name)
        if info.ispkg:
            folder = Path(getattr(info.module_finder, "path", "")) / last
            _walk([str(folder)], f"{info.name}.", found)


def discovered_packages() -> list[str]:
    """The packages whose modules define jobs and crons.

    A generated project's `jobs` and `crons`; in a Django project, those of its
    installed apps (workergen_runtime.django.discovery).
    """
    if project.FRAMEWORK == "django":
        from workergen_runtime.django.discovery import django_packages

        return django_packages(DISCOVERED_PACKAGES)
    return [f"{project.PACKAGE}.{sub}" for sub in DISCOVERED_PACKAGES]


def job_modules() -> list[str]:
    """Every module below the discovered `jobs` and `crons` packages, sorted."""
    found: list[str] = []
    for name in discovered_packages():
        package = _import(name)
        _walk(list(package.__path__), f"{package.__name__}.", found)
    return sorted(found)


def import_jobs() -> list[str]:
    """Import every job and cron module, so their tasks are registered."""
    modules = job_modules()
    for name in modules:
        _import(name)
    return modules
