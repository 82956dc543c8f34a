"""`workergen diff`: how the project differs from the template version it records.

Renders the recorded template version (read from the installed workergen's
template history, or from `--template`) with the recorded answers into a
temporary directory and compares it with the project, file by file. Only
files the template owns are compared: files the user owns once they exist
(the template's `_skip_if_exists`: jobs, crons and their tests) are left out
unless `--all` is given, and files the template never rendered (the user's own
jobs, caches, `.env`) are never listed. `.copier-answers.yml` is left out: it
differs by design.
"""

from __future__ import annotations

import difflib
import tempfile
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Annotated, Any

import typer

from workergen.copier_run import CopierFailedError, copy_template
from workergen.errors import VersionRenderError
from workergen.generated_project import find_project
from workergen.options import HistoryOption
from workergen.provenance import ANSWERS_FILE
from workergen.releases import TemplateHistory, TemplateVersion
from workergen.template_source import history_of

AllFiles = Annotated[
    bool,
    typer.Option(
        "--all",
        help="Also compare the files the template creates and you own (jobs, crons, their tests).",
    ),
]


def diff(all_files: AllFiles = False, template: HistoryOption = None) -> None:
    """Show the project's edits to the files the template owns, as a unified diff."""
    project = find_project(Path.cwd())
    provenance = project.provenance
    with (
        history_of(template) as history,
        tempfile.TemporaryDirectory(prefix="workergen-diff-") as scratch,
    ):
        base = history.version(str(provenance.commit))
        rendered, is_user_owned = render_version(
            history, base, project.user_answers, Path(scratch) / "rendered"
        )
        found = False
        for relative in sorted(_files(rendered)):
            if relative == ANSWERS_FILE or (not all_files and is_user_owned(relative)):
                continue
            for line in file_diff(rendered / relative, project.root / relative, relative):
                found = True
                typer.echo(line, nl=False)
    if not found:
        typer.echo(f"No differences from template {base.name}.")


def render_version(
    history: TemplateHistory,
    version: TemplateVersion,
    answers: Mapping[str, Any],
    rendered: Path,
) -> tuple[Path, Callable[[str], bool]]:
    """Render `version` of the template with `answers` into the new directory `rendered`.

    Returns the rendered directory and a test telling whether a path is user-owned.
    """
    config = read_config(history.file_at(version.commit, "copier.yml"))
    try:
        copy_template(history.path, rendered, answers, vcs_ref=version.commit)
    except CopierFailedError as error:
        raise VersionRenderError(version=version.name, reason=error.reason) from None
    return rendered, user_owned_matcher(config, answers)


def file_diff(template_file: Path, project_file: Path, relative: str) -> Iterator[str]:
    """The unified diff lines from the template's file to the project's (none if equal)."""
    old = template_file.read_bytes()
    new = project_file.read_bytes() if project_file.is_file() else None
    if old == new:
        return iter(())
    try:
        old_lines = old.decode("utf-8").splitlines(keepends=True)
        new_lines = [] if new is None else new.decode("utf-8").splitlines(keepends=True)
    except UnicodeDecodeError:
        return iter([f"Binary files template/{relative} and project/{relative} differ\n"])
    return (
        line if line.endswith("\n") else f"{line}\n\\ No newline at end of file\n"
        for line in difflib.unified_diff(
            old_lines,
            new_lines,
            fromfile=f"template/{relative}",
            tofile=f"project/{relative}" if new is not None else "/dev/null",
        )
    )


def _files(root: Path) -> Iterator[str]:
    for path in root.rglob("*"):
        if path.is_file():
            yield path.relative_to(root).as_posix()


def read_config(text: str) -> dict[str, Any]:
    import yaml

    data = yaml.safe_load(text) if text else {}
    return data if isinstance(data, dict) else {}


def user_owned_matcher(
    config: Mapping[str, Any], answers: Mapping[str, Any]
) -> Callable[[str], bool]:
    """Match paths against the template's `_skip_if_exists`, rendered with the answers."""
    from pathspec import PathSpec

    from workergen.answers import make_environment

    patterns = config.get("_skip_if_exists") or []
    if isinstance(patterns, str):
        patterns = [patterns]
    env = make_environment(config.get("_envops") or {})
    rendered = [env.from_string(str(pattern)).render(dict(answers)) for pattern in patterns]
    try:
        spec = PathSpec.from_lines("gitignore", rendered)  # pathspec >= 1.0
    except (KeyError, LookupError):
        spec = PathSpec.from_lines("gitwildmatch", rendered)
    return spec.match_file
