"""Load a generated project's scaffolding code straight from its files.

`workergen make:job` runs the project's own `core/scaffold.py` (standard library only) without
importing the project or its dependencies, so it writes exactly what the project's own
`make:job` writes, from the project's own stubs.
"""

from __future__ import annotations

import importlib
import re
import sys
import types
import uuid
from pathlib import Path
from typing import Any

from workergen.errors import UserMessageError

ANSWERS_FILE = ".copier-answers.yml"


class NotInProjectError(UserMessageError):
    """workergen was asked to scaffold outside a generated project."""

    def __init__(self, *, start: Path) -> None:
        super().__init__(
            f"{start} is not inside a generated project (no {ANSWERS_FILE} here or above)",
            hint="Run this from a project made by `workergen new`, or cd into one.",
        )


class ProjectCoreMissingError(UserMessageError):
    """The project's core has no scaffolding module (made by an older template)."""

    def __init__(self, *, core: Path) -> None:
        super().__init__(
            f"{core} has no scaffold.py; this project predates make:job",
            hint="Run `copier update` in the project to bring the template's core up to date.",
        )


def find_project_root(start: Path) -> Path:
    """The closest folder at or above `start` holding `.copier-answers.yml`."""
    start = start.resolve()
    for folder in (start, *start.parents):
        if (folder / ANSWERS_FILE).is_file():
            return folder
    raise NotInProjectError(start=start)


def package_of(root: Path) -> str:
    """The project's package name, from its answers file."""
    text = (root / ANSWERS_FILE).read_text(encoding="utf-8")
    match = re.search(r"^package_name:\s*['\"]?([A-Za-z_][A-Za-z0-9_]*)", text, re.MULTILINE)
    if not match:
        raise UserMessageError(f"{root / ANSWERS_FILE} has no package_name answer")
    return match.group(1)


def load_core(root: Path, package: str) -> tuple[Any, Any]:
    """Import the project's `core/scaffold.py` and `core/project.py` under a private name.

    The package's `__init__` is not run: it would import Celery and the project's settings.
    """
    core = root / package / "core"
    if not (core / "scaffold.py").is_file():
        raise ProjectCoreMissingError(core=core)
    alias = f"_workergen_project_core_{uuid.uuid4().hex}"
    shell = types.ModuleType(alias)
    shell.__path__ = [str(core)]
    sys.modules[alias] = shell
    return importlib.import_module(f"{alias}.scaffold"), importlib.import_module(f"{alias}.project")
