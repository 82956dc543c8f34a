"""Rendering a project with copier, so that a failure leaves nothing behind.

Copier renders into a staging directory beside the target; only when it has
finished are the files moved into place. The answers are collected and
validated before this module is called, so copier never prompts.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from workergen.copier_run import CopierFailedError, copy_template, failure_reason
from workergen.errors import (
    RenderError,
    TargetNotADirectoryError,
    TargetNotCreatedError,
    TargetNotEmptyError,
    TargetNotWritableError,
    TargetUnderAFileError,
)
from workergen.template_source import TemplateSource


@dataclass(frozen=True)
class RenderedFile:
    """A file `render_project` put in place: its path in the project and what happened."""

    path: PurePosixPath
    action: str  # "create" or "overwrite"


def check_target(target: Path, *, force: bool) -> None:
    """Refuse a target that cannot become the project's directory, before anything is asked.

    Refused: a target that is a file, a non-empty directory unless `force`, a path
    under a file, and a place this user may not write to.
    """
    if target.exists() or target.is_symlink():
        if not target.is_dir():
            raise TargetNotADirectoryError(path=target)
        if not force and any(target.iterdir()):
            raise TargetNotEmptyError(path=target)
        if not os.access(target, os.W_OK | os.X_OK):
            raise TargetNotWritableError(path=target, directory=target)
        return
    existing = target.parent
    while not (existing.exists() or existing.is_symlink()):
        existing = existing.parent
    if not existing.is_dir():
        raise TargetUnderAFileError(path=target, file=existing)
    # The parent directories and the staging directory beside the target are created here.
    if not os.access(existing, os.W_OK | os.X_OK):
        raise TargetNotWritableError(path=target, directory=existing)


def render_project(
    source: TemplateSource,
    target: Path,
    answers: Mapping[str, Any],
    *,
    pretend: bool = False,
) -> list[RenderedFile]:
    """Render the template into `target` with `answers`; return the files written.

    With `pretend`, copier lists what it would write (on stderr) and nothing
    is written at all.
    """
    target = target.absolute()
    if pretend:
        try:
            _run_copier(source, target, answers, pretend=True)
        except CopierFailedError as error:
            raise RenderError(target=target, reason=error.reason) from None
        return []

    new_dirs = _missing_dirs(target.parent)
    staging = target.parent / f".{target.name}.workergen-{secrets.token_hex(4)}"
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        staging.mkdir()
    except OSError as error:
        for directory in new_dirs:
            _remove_if_empty(directory)
        # check_target saw nothing wrong: a place only the attempt tells about (a
        # read-only file system, a path the system refuses even to root).
        raise TargetNotCreatedError(path=target, reason=error.strerror or str(error)) from None
    try:
        _run_copier(source, staging, answers, pretend=False)
        rendered = _list_files(staging, target)
        _check_collisions(staging, target)
        _move_into_place(staging, target)
    except BaseException as error:
        shutil.rmtree(staging, ignore_errors=True)
        for directory in new_dirs:
            _remove_if_empty(directory)
        reason = failure_reason(error)
        if reason is not None:
            raise RenderError(target=target, reason=reason) from error
        raise
    return rendered


def _run_copier(
    source: TemplateSource, destination: Path, answers: Mapping[str, Any], *, pretend: bool
) -> None:
    with source.without_clone() as tree:
        copy_template(
            tree.path, destination, answers, vcs_ref=tree.vcs_ref, pretend=pretend, overwrite=True
        )


def _missing_dirs(directory: Path) -> list[Path]:
    """The ancestors of `directory` (itself included) that do not exist, deepest first."""
    missing = []
    while not directory.exists():
        missing.append(directory)
        directory = directory.parent
    return missing


def _remove_if_empty(directory: Path) -> None:
    with contextlib.suppress(OSError):
        directory.rmdir()


def _list_files(staging: Path, target: Path) -> list[RenderedFile]:
    result = []
    for path in sorted(staging.rglob("*")):
        if path.is_dir() and not path.is_symlink():
            continue
        relative = path.relative_to(staging)
        existing = target / relative
        action = "overwrite" if existing.exists() or existing.is_symlink() else "create"
        result.append(RenderedFile(path=PurePosixPath(relative.as_posix()), action=action))
    return result


def _check_collisions(staging: Path, target: Path) -> None:
    """Fail before moving anything when a rendered path cannot replace what is there."""
    if not target.exists():
        return
    for path in staging.rglob("*"):
        existing = target / path.relative_to(staging)
        is_dir = path.is_dir() and not path.is_symlink()
        if is_dir and (existing.is_symlink() or (existing.exists() and not existing.is_dir())):
            raise TargetNotADirectoryError(path=existing)
        if not is_dir and existing.is_dir() and not existing.is_symlink():
            raise RenderError(
                target=target, reason=f"{existing} is a directory where the project has a file"
            )


def _move_into_place(staging: Path, target: Path) -> None:
    if not target.exists():
        # One rename: the project appears whole or not at all.
        os.replace(staging, target)
        return
    # An existing (empty, or --force) target is filled in place rather than
    # replaced, so that it keeps its identity (it may be the current directory).
    _merge(staging, target)


def _merge(source: Path, destination: Path) -> None:
    for entry in source.iterdir():
        counterpart = destination / entry.name
        if entry.is_dir() and not entry.is_symlink() and counterpart.is_dir():
            _merge(entry, counterpart)
        else:
            os.replace(entry, counterpart)
    source.rmdir()
