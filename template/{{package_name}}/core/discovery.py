"""Find the modules that define jobs and crons: nothing is listed by hand."""

from __future__ import annotations

import importlib
import pkgutil

from . import project

DISCOVERED_PACKAGES = ("jobs", "crons")


def job_modules() -> list[str]:
    """Every module below the project's `jobs` and `crons` packages, sorted."""
    found: list[str] = []
    for sub in DISCOVERED_PACKAGES:
        package = importlib.import_module(f"{project.PACKAGE}.{sub}")
        prefix = f"{package.__name__}."
        found.extend(
            info.name
            for info in pkgutil.walk_packages(package.__path__, prefix)
            if not info.name.rsplit(".", 1)[-1].startswith("_")
        )
    return sorted(found)


def import_jobs() -> list[str]:
    """Import every job and cron module, so their tasks are registered."""
    modules = job_modules()
    for name in modules:
        importlib.import_module(name)
    return modules
