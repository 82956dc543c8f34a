"""Load a generated project's own core straight from its files.

`workergen make:job` runs the project's `core/make_cli.py` (its commands and options) and
`core/scaffold.py` without importing the project's package or its dependencies, so it offers
exactly the options and writes exactly the files of the project's own `make:job`.
"""

from __future__ import annotations

import importlib
import sys
import types
import uuid
from pathlib import Path
from typing import Any

from workergen.errors import UserMessageError

CORE_MODULES = ("make_cli.py", "scaffold.py")
"""The files of the core that `workergen make:*` runs."""


class ProjectCoreMissingError(UserMessageError):
    """The project's core has no scaffolding module (made by an older template)."""

    def __init__(self, *, core: Path, missing: str) -> None:
        super().__init__(
            f"{core} has no {missing}; this project predates make:job",
            hint="Run `copier update` in the project to bring the template's core up to date.",
        )


def load_core(root: Path, package: str) -> Any:
    """The project's `core/make_cli.py`, imported under a private package name.

    The package's `__init__` is not run: it would import Celery and the project's settings.
    """
    core = root / package / "core"
    for name in CORE_MODULES:
        if not (core / name).is_file():
            raise ProjectCoreMissingError(core=core, missing=name)
    alias = f"_workergen_project_core_{uuid.uuid4().hex}"
    shell = types.ModuleType(alias)
    shell.__path__ = [str(core)]
    sys.modules[alias] = shell
    return importlib.import_module(f"{alias}.make_cli")


def project_error(module: Any) -> type[BaseException]:
    """The root of the errors a loaded core raises on purpose (its `errors.ProjectError`)."""
    package = module.__name__.rsplit(".", 1)[0]
    return importlib.import_module(f"{package}.errors").ProjectError
