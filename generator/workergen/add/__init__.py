"""`workergen add`: the workers added to an existing project, planned in full, then written.

A kind of project (`workergen.add.django`, one module each) is found by `detect`,
the first kind that recognises the folder. It renders its files from
`template_add/<kind>/` (copier.yml's `add_to` answer picks the folder) into a
scratch directory, and compares them with the project: a file that is not there
is created, one with the same bytes is left alone, and one with other bytes is
the user's, never overwritten. Edits of the user's own files (registering the
app, ...) are `Edit`s: shown as a diff, asked, then made. Nothing is written
until the whole plan has been made and checked; a failure while writing puts
back what was written.
"""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from workergen.errors import UserMessageError
from workergen.provenance import ADDED_ANSWERS_FILE as ANSWERS_FILE

__all__ = [
    "ANSWERS_FILE",
    "Edit",
    "Kind",
    "Left",
    "NewFile",
    "Plan",
    "append_env_example",
    "compare",
    "read_text",
    "write",
]


@dataclass(frozen=True)
class NewFile:
    """A file of ours that the project does not have yet."""

    path: str
    content: bytes


@dataclass(frozen=True)
class Edit:
    """A change to a file the project owns: `before` and `after` are its whole text."""

    path: str
    before: str
    after: str
    by_hand: str
    """What to add by hand when the edit is declined."""

    def diff(self) -> str:
        """The edit as a unified diff, as `git diff` shows it."""
        return "".join(
            difflib.unified_diff(
                self.before.splitlines(keepends=True),
                self.after.splitlines(keepends=True),
                fromfile=f"a/{self.path}",
                tofile=f"b/{self.path}",
            )
        )


@dataclass(frozen=True)
class Left:
    """A file of ours the project already has with its own content: it stays as it is."""

    path: str
    why: str
    blocking: bool
    """Whether the workers cannot run without our version (the add is refused)."""


@dataclass
class Plan:
    """Everything an add would do, decided before anything is written."""

    root: Path
    create: list[NewFile] = field(default_factory=list)
    same: list[str] = field(default_factory=list)
    edits: list[Edit] = field(default_factory=list)
    left: list[Left] = field(default_factory=list)

    @property
    def blocked(self) -> list[Left]:
        return [item for item in self.left if item.blocking]

    @property
    def changes_nothing(self) -> bool:
        return not self.create and not self.edits


class Kind(Protocol):
    """A kind of project `workergen add` knows: a module (see `workergen.add.django`)."""

    NAME: str
    """The `add_to` answer, and the folder of its files: `template_add/<NAME>/`."""

    def recognises(self, root: Path) -> bool:
        """Whether the folder `root` is a project of this kind."""

    def inspect(self, root: Path) -> Any:
        """The project at `root` (its layout, apps, ...); a user error when it is incomplete."""

    def check_app(self, project: Any, app: str) -> None:
        """Refuse an `--app` the project does not have, listing those it has."""

    def apps(self, project: Any) -> Sequence[str]:
        """The project's apps, one of which holds the jobs."""

    def fixed_answers(self, project: Any, app: str) -> dict[str, Any]:
        """The answers taken from the project rather than asked."""

    def namespace_default(self, project: Any) -> str:
        """The queue namespace offered."""

    def plan(self, project: Any, rendered: Path, answers: Mapping[str, Any]) -> Plan:
        """What adding the files rendered into `rendered` does to the project."""


def read_text(path: Path) -> str:
    """A project file's text; a file that is not UTF-8 text is a user error."""
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise UserMessageError(
            f"{path} is not UTF-8 text", hint="workergen add edits only UTF-8 text files."
        ) from None


_ENV_KEY = re.compile(r"^([A-Z][A-Z0-9_]*)=", re.MULTILINE)


def append_env_example(plan: Plan, env_file: Path, rendered: str, *, docs: str) -> None:
    """The workers' settings appended to the project's .env.example, unless it has them all."""
    before = read_text(env_file)
    if set(_ENV_KEY.findall(rendered)) <= set(_ENV_KEY.findall(before)):
        return
    joint = before if before.endswith("\n") or not before else before + "\n"
    header = f"# The workers' settings (workergen add, see {docs}).\n"
    plan.edits.append(
        Edit(
            path=env_file.relative_to(plan.root).as_posix(),
            before=before,
            after=joint + ("\n" if joint else "") + header + rendered,
            by_hand=f"the workers' settings (BROKER_URL, QUEUE_NAMESPACE, ...): see {docs}",
        )
    )


def compare(plan: Plan, rendered: Path, *, owned: Callable[[str], Left | None]) -> None:
    """Sort the files rendered into `rendered` by what the project has at the same path.

    `owned(path)` says what happens to a file the project has with other content:
    None for an answers-file-like file of ours to leave as it is, else a `Left`.
    """
    for path in sorted(rendered.rglob("*")):
        if path.is_dir():
            continue
        relative = path.relative_to(rendered).as_posix()
        existing = plan.root / relative
        content = path.read_bytes()
        if not existing.exists() and not existing.is_symlink():
            plan.create.append(NewFile(relative, content))
        elif existing.is_file() and existing.read_bytes() == content:
            plan.same.append(relative)
        else:
            left = owned(relative)
            if left is not None:
                plan.left.append(left)


def write(plan: Plan, edits: Sequence[Edit]) -> None:
    """Write the new files and make `edits`; on any failure, put back what was written."""
    created: list[Path] = []
    new_dirs: list[Path] = []
    edited: list[tuple[Path, str]] = []
    try:
        for new in plan.create:
            target = plan.root / new.path
            new_dirs += _make_parents(target.parent)
            with target.open("xb") as handle:
                created.append(target)
                handle.write(new.content)
        for edit in edits:
            target = plan.root / edit.path
            current = read_text(target)
            if current != edit.before:
                raise UserMessageError(
                    f"{target} changed while workergen add ran", hint="Run workergen add again."
                )
            edited.append((target, current))
            _replace_text(target, edit.after)
    except BaseException:
        for target, before in reversed(edited):
            _replace_text(target, before)
        for target in reversed(created):
            target.unlink(missing_ok=True)
        for directory in reversed(new_dirs):
            if directory.is_dir() and not any(directory.iterdir()):
                directory.rmdir()
        raise


def _make_parents(directory: Path) -> list[Path]:
    missing = []
    while not directory.exists():
        missing.append(directory)
        directory = directory.parent
    for path in reversed(missing):
        path.mkdir()
    return list(reversed(missing))


def _replace_text(target: Path, text: str) -> None:
    """Replace a file's text in one rename, keeping its permissions."""
    scratch = target.with_name(f".{target.name}.workergen-add")
    scratch.write_text(text, encoding="utf-8")
    os.chmod(scratch, target.stat().st_mode)
    os.replace(scratch, target)
