"""`workergen diff`: how the project differs from the template version it records.

Renders the recorded template version with the recorded answers into a
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
import warnings
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Annotated, Any

import typer

from workergen import releases
from workergen.errors import UpdateFailedError
from workergen.generated_project import GeneratedProject, find_project
from workergen.provenance import ANSWERS_FILE, Provenance

AllFiles = Annotated[
    bool,
    typer.Option(
        "--all",
        help="Also compare the files the template creates and you own (jobs, crons, their tests).",
    ),
]


def diff(all_files: AllFiles = False) -> None:
    """Show the project's edits to the files the template owns, as a unified diff."""
    project = find_project(Path.cwd())
    provenance = project.provenance
    with tempfile.TemporaryDirectory(prefix="workergen-diff-") as scratch:
        rendered, is_user_owned = render_recorded(project, provenance, Path(scratch))
        found = False
        for relative in sorted(_files(rendered)):
            if relative == ANSWERS_FILE or (not all_files and is_user_owned(relative)):
                continue
            for line in file_diff(rendered / relative, project.root / relative, relative):
                found = True
                typer.echo(line, nl=False)
    if not found:
        typer.echo(f"No differences from template {provenance.commit}.")


def render_recorded(
    project: GeneratedProject, provenance: Provenance, scratch: Path
) -> tuple[Path, Callable[[str], bool]]:
    """Render the project's template version with its answers into `scratch`.

    Returns the rendered directory and a test telling whether a path is user-owned.
    """
    checkout = scratch / "template"
    releases.checkout(provenance.src_path, str(provenance.commit), checkout)
    config = _read_config(checkout / "copier.yml")
    rendered = scratch / "rendered"
    _render(checkout, rendered, provenance.commit, project.user_answers)
    return rendered, _user_owned_matcher(config, project.user_answers)


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


def _read_config(copier_yml: Path) -> dict[str, Any]:
    import yaml

    data = yaml.safe_load(copier_yml.read_text(encoding="utf-8")) if copier_yml.is_file() else {}
    return data if isinstance(data, dict) else {}


def _render(
    template: Path, destination: Path, commit: str | None, answers: Mapping[str, Any]
) -> None:
    # Imported here: copier is slow to import and only rendering needs it.
    from copier import Settings, run_copy
    from copier.errors import CopierError

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            run_copy(
                str(template),
                destination,
                data=dict(answers),
                vcs_ref=commit,
                settings=Settings(),
                defaults=True,
                unsafe=False,
                quiet=True,
            )
        except CopierError as error:
            raise UpdateFailedError(project=destination, reason=str(error)) from None


def _user_owned_matcher(
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
