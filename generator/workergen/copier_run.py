"""Every call workergen makes into copier, with the settings they all share.

Copier runs unattended (`defaults=True`: the answers are collected and checked
before), never runs the template's tasks (`unsafe=False`), and ignores the
user's copier settings file (`Settings()`), so the same answers always render
the same files. Copier is imported here only: it is slow to import, and
`workergen --help` must not pay for it.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from workergen.errors import WorkergenError


class CopierFailedError(WorkergenError):
    """Copier (or the template's Jinja) stopped; `reason` says why, in copier's words."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(reason)


def copy_template(
    src_path: str | Path,
    destination: Path,
    answers: Mapping[str, Any],
    *,
    vcs_ref: str | None,
    pretend: bool = False,
    overwrite: bool = False,
    quiet: bool = True,
) -> None:
    """Render the template at `src_path` (version `vcs_ref`) into `destination`.

    A pretend run lists on stderr what it would write, and writes nothing.
    """
    with _copier() as copier:
        copier.run_copy(
            str(src_path),
            destination,
            data=dict(answers),
            vcs_ref=vcs_ref,
            settings=copier.Settings(),
            defaults=True,
            unsafe=False,
            overwrite=overwrite,
            cleanup_on_error=False,
            quiet=quiet and not pretend,
            pretend=pretend,
        )


def update_project(root: Path, *, vcs_ref: str) -> None:
    """Update the project at `root` to `vcs_ref` of the template its answers file names.

    Recorded answers are kept, new questions take their defaults, and
    conflicts are left inline (`<<<<<<< before updating`).
    """
    with _copier() as copier:
        copier.run_update(
            root,
            vcs_ref=vcs_ref,
            settings=copier.Settings(),
            overwrite=True,
            skip_answered=True,
            defaults=True,
            conflict="inline",
            unsafe=False,
            quiet=True,
        )


@contextmanager
def _copier() -> Iterator[Any]:
    import copier
    from copier.errors import CopierError, DirtyLocalWarning
    from jinja2 import TemplateError

    failures: tuple[type[BaseException], ...] = (CopierError, TemplateError, ValueError)
    with warnings.catch_warnings():
        # Rendering an editable install's uncommitted template is the point.
        warnings.simplefilter("ignore", DirtyLocalWarning)
        try:
            yield copier
        except failures as error:
            raise CopierFailedError(str(error) or type(error).__name__) from error


def failure_reason(error: BaseException) -> str | None:
    """Why copier failed, if `error` is copier's (or a file the render could not write)."""
    if isinstance(error, CopierFailedError):
        return error.reason
    if isinstance(error, OSError):
        return str(error)
    return None
