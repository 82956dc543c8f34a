"""The project the runtime serves: the answers it was generated with.

A generated project's package binds itself when it is imported (its `__init__`
calls `bind` with its `project` module), so every module here reads the project's
package, lanes and broker from this one place. A process that imports the
runtime before the project (`celery -A workergen_runtime.celery_app ...`) names
the project's package in WORKERGEN_PROJECT instead; it is imported on first use.
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType
from typing import Any

from workergen_runtime.errors import ConfigurationError

# The answers a project module holds (`<package>/project.py`, written by the template).
ANSWERS = (
    "PACKAGE",
    "PROJECT_NAME",
    "BROKER",
    "LANES",
    "DEFAULT_NAMESPACE",
    "RESULT_BACKEND",
    "SQS_REGION",
    "QUEUE_TYPE",
    "HTTP_API",
)
# Answers a project module may leave out (projects made before them bind all the same),
# with the value of a project that lacks them. Workers added to a Django project
# (`<settings package>/workers.py`) have them: see workergen_runtime.django.
OPTIONAL_ANSWERS: dict[str, Any] = {
    "FRAMEWORK": "none",
    "DJANGO_SCHEDULER": "crons",
    "DJANGO_RESULTS": False,
}
VARIABLE = "WORKERGEN_PROJECT"

_bound: dict[str, Any] = {}


def bind(answers: ModuleType) -> None:
    """Serve the project whose answers `answers` holds; a process serves one project."""
    missing = [name for name in ANSWERS if not hasattr(answers, name)]
    if missing:
        raise ConfigurationError(
            f"{answers.__name__} lacks {', '.join(missing)}: it is not a workergen project "
            "module. Run `workergen update` in the project to bring it up to date."
        )
    values = {name: getattr(answers, name) for name in ANSWERS}
    values.update({name: getattr(answers, name, v) for name, v in OPTIONAL_ANSWERS.items()})
    values["LANES"] = tuple(values["LANES"])
    if _bound and _bound != values:
        raise ConfigurationError(
            f"This process already serves project {_bound['PACKAGE']!r}; "
            f"it cannot also serve {values['PACKAGE']!r}. Run each project in its own process."
        )
    _bound.update(values)
    globals().update(values)


def bound() -> bool:
    """Whether a project is bound (a project module imported, or WORKERGEN_PROJECT)."""
    return bool(_bound)


def __getattr__(name: str) -> Any:
    # Only reached while nothing is bound: bind() sets the answers as module globals.
    if name not in ANSWERS and name not in OPTIONAL_ANSWERS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    package = os.environ.get(VARIABLE, "").strip()
    if not package:
        raise ConfigurationError(
            "No workergen project is bound: the runtime serves a generated project. "
            "Import the project's package first (`python -m <package> ...`, "
            "`celery -A <package>.app ...`), or set WORKERGEN_PROJECT to its package name."
        )
    try:
        importlib.import_module(package)
    except ImportError as exc:
        raise ConfigurationError(
            f"WORKERGEN_PROJECT={package!r} cannot be imported ({exc}). "
            "Set it to the package name of a generated project installed here."
        ) from exc
    if not _bound:
        raise ConfigurationError(
            f"WORKERGEN_PROJECT={package!r} is not a workergen project: "
            "its package does not bind the runtime."
        )
    return _bound[name]
