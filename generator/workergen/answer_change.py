"""A changed answer, carried into the files the template renders from it, as copier would.

`make:job --add-lane` changes the `lanes` answer. Every template-owned file that lists the
lanes (README.md, <package>/project.py, deploy/compose.yaml, the Kubernetes, Prometheus and
Grafana files, ...) must then say what a project rendered with the new answer says, or
`workergen diff` shows the old text as the user's edit. The template version the project
records is rendered twice, with the recorded answers and with the new ones; each file that
differs between the two takes that difference with a three-way merge (`git merge-file`), so
the user's own edits to it are kept. Nothing is written here: the caller writes the files.
"""

from __future__ import annotations

import subprocess
import tempfile
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from workergen.commands.diff import read_config, render_version, user_owned_matcher
from workergen.copier_run import CopierFailedError, copy_template
from workergen.errors import (
    NoTemplateVersionError,
    UnknownTemplateVersionError,
    UserMessageError,
    VersionRenderError,
)
from workergen.generated_project import GeneratedProject, find_project
from workergen.provenance import ANSWERS_FILE
from workergen.releases import TemplateHistory
from workergen.template_source import history_of, locate_template


class AnswerMergeError(UserMessageError):
    """The user's edits overlap what the new answer changes in some files."""

    def __init__(self, *, question: str, files: list[str]) -> None:
        super().__init__(
            f"the new {question} answer changes {', '.join(files)} where you edited "
            f"{'it' if len(files) == 1 else 'them'}; nothing was written",
            hint="Commit or undo your edits there (`workergen diff` shows them), then run "
            "the command again.",
        )


def rerender(root: Path, answers: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The template-owned files of the project at `root` as the new `answers` render them.

    Returns (path relative to the project, new text) for each file whose text changes,
    sorted by path, the user's edits merged in. `answers` are the questions' answers
    (copier's own `_` entries are ignored); the answers file itself is left to the caller.
    """
    project = find_project(root)
    old = project.user_answers
    new = {key: value for key, value in answers.items() if not key.startswith("_")}
    changed_questions = sorted(key for key in {*old, *new} if old.get(key) != new.get(key))
    if not changed_questions:
        return []
    with tempfile.TemporaryDirectory(prefix="workergen-answers-") as scratch:
        before, after, is_user_owned = _render_both(project, old, new, Path(scratch))
        updates: list[tuple[str, str]] = []
        conflicts: list[str] = []
        for path in sorted(after.rglob("*")):
            relative = path.relative_to(after).as_posix()
            if not path.is_file() or relative == ANSWERS_FILE or is_user_owned(relative):
                continue
            base = before / relative
            if base.is_file() and base.read_bytes() == path.read_bytes():
                continue  # most files: the answer does not reach them
            text = path.read_text(encoding="utf-8")
            base_text = base.read_text(encoding="utf-8") if base.is_file() else None
            mine = project.root / relative
            if not mine.is_file():
                if base_text is None:  # a file the new answer adds
                    updates.append((relative, text))
                continue  # the user deleted it: it stays deleted
            mine_text = mine.read_text(encoding="utf-8")
            if mine_text == text:
                continue
            if mine_text == base_text:
                updates.append((relative, text))
                continue
            # Either the user edited the file or it is theirs where the new answer adds one.
            merged = None if base_text is None else _merge(mine, base, path)
            if merged is None:
                conflicts.append(relative)
            elif merged != mine_text:
                updates.append((relative, merged))
    if conflicts:
        raise AnswerMergeError(question=", ".join(changed_questions), files=conflicts)
    return updates


def _render_both(
    project: GeneratedProject, old: Mapping[str, Any], new: Mapping[str, Any], scratch: Path
) -> tuple[Path, Path, Callable[[str], bool]]:
    """The template rendered with the old and with the new answers, and who owns which path.

    The version the project records, when the template's history holds it; else (a version
    made from uncommitted template edits, say) the installed template: the merge then
    carries only what the answers change into the project's files.
    """
    try:
        with _history(str(project.answers.get("_src_path") or "")) as history:
            version = history.version(str(project.provenance.commit))
            before, is_user_owned = render_version(history, version, old, scratch / "before")
            after, _ = render_version(history, version, new, scratch / "after")
            return before, after, is_user_owned
    except (UnknownTemplateVersionError, NoTemplateVersionError):
        pass
    source = locate_template()
    config = read_config(source.copier_yml.read_text(encoding="utf-8"))
    with source.without_clone() as tree:
        for name, answers in (("before", old), ("after", new)):
            try:
                copy_template(tree.path, scratch / name, answers, vcs_ref=tree.vcs_ref)
            except CopierFailedError as error:
                raise VersionRenderError(version="installed", reason=error.reason) from None
    return scratch / "before", scratch / "after", user_owned_matcher(config, old)


@contextmanager
def _history(src_path: str) -> Iterator[TemplateHistory]:
    """The template history the project was rendered from.

    A project made with `workergen new --template DIR` records DIR; any other records the
    public address and is rendered from the history of the installed workergen, offline.
    """
    local = Path(src_path).expanduser() if src_path else None
    with history_of(str(local) if local is not None and local.is_dir() else None) as history:
        yield history


def _merge(mine: Path, base: Path, theirs: Path) -> str | None:
    """`mine` with the change from `base` to `theirs`; None when they overlap."""
    done = subprocess.run(
        ["git", "merge-file", "-p", "--quiet", str(mine), str(base), str(theirs)],
        capture_output=True,
    )
    if done.returncode != 0:
        return None
    return done.stdout.decode("utf-8")
