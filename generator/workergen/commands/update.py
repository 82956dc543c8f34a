"""`workergen update`: bring template changes into the project, and say what needs a hand.

Copier does the update (a three-way merge of the template's changes into the
project). workergen adds what copier leaves out: it refuses to start on a
dirty tree with the reason, never lets the update delete a user-owned file,
and lists every file left with conflict markers or a `.rej` file, exiting
non-zero, because copier itself exits 0 in that case.
"""

from __future__ import annotations

import subprocess
import tempfile
import warnings
from pathlib import Path, PurePosixPath
from typing import Annotated

import typer

from workergen import exit_codes
from workergen.errors import UpdateFailedError
from workergen.generated_project import (
    GeneratedProject,
    changed_files,
    find_project,
    git,
    require_clean_git,
    unresolved_files,
)
from workergen.options import VcsRef

UpdatePretend = Annotated[
    bool,
    typer.Option(
        "--pretend", help="Show what the update would change and where it would conflict."
    ),
]

# Directories (relative to the project) whose files belong to the user once they
# exist; an update never removes them even if the template stops shipping one.
USER_OWNED_DIRS = ("{package}/jobs", "{package}/crons", "tests/jobs", "tests/crons")


def update(vcs_ref: VcsRef = None, pretend: UpdatePretend = False) -> None:
    """Update the project to the latest template release (or --vcs-ref).

    Exit codes: 0 updated cleanly, 11 files need a hand (conflict markers or
    .rej files, listed), 1 an error (dirty tree, not a project, ...).
    """
    project = find_project(Path.cwd())
    provenance = project.provenance
    require_clean_git(project.root)

    if pretend:
        code = _pretend(project, vcs_ref)
    else:
        typer.echo(f"Updating from {provenance.commit} ({provenance.src_path})")
        code = _update(project, vcs_ref)
    raise typer.Exit(code)


def _update(project: GeneratedProject, vcs_ref: str | None) -> int:
    user_files = _tracked_user_files(project)
    _run_copier_update(project.root, vcs_ref)
    kept = _restore_removed(project.root, user_files)
    for path in kept:
        typer.echo(f"  kept {path} (yours; the new template version no longer ships it)")

    new_commit = find_project(project.root).answers.get("_commit")
    changed = changed_files(project.root)
    unresolved = unresolved_files(project.root)
    if not changed:
        typer.secho(f"Already up to date ({new_commit}).", fg="green")
        return exit_codes.OK
    for path in changed:
        mark = typer.style("conflict", fg="red") if path in unresolved else "changed "
        typer.echo(f"  {mark} {path}")
    for path in unresolved:
        if path not in changed:
            typer.echo(f"  {typer.style('conflict', fg='red')} {path}")
    if unresolved:
        _report_unresolved(unresolved, done=f"Updated to {new_commit}")
        return exit_codes.CONFLICTS
    typer.secho(
        f"Updated to {new_commit}. Review with `git diff`, run the tests, then commit.",
        fg="green",
    )
    return exit_codes.OK


def _pretend(project: GeneratedProject, vcs_ref: str | None) -> int:
    """Run the update on a throwaway clone of the project and report what it did there."""
    top = Path(git(project.root, "rev-parse", "--show-toplevel").strip())
    subdir = project.root.relative_to(top)
    with tempfile.TemporaryDirectory(prefix="workergen-pretend-") as scratch:
        clone = Path(scratch) / "project"
        subprocess.run(
            ["git", "clone", "--quiet", "--no-hardlinks", str(top), str(clone)],
            check=True,
            capture_output=True,
        )
        root = clone / subdir
        _run_copier_update(root, vcs_ref)
        new_commit = find_project(root).answers.get("_commit")
        changed = changed_files(root)
        unresolved = unresolved_files(root)
        diff = git(root, "diff", "--", ".")
    if not changed:
        typer.echo(f"Pretend run: already up to date ({new_commit}); nothing would change.")
        return exit_codes.OK
    typer.echo(f"Pretend run: updating to {new_commit} would change:")
    for path in changed:
        mark = "conflict" if path in unresolved else "changed "
        typer.echo(f"  {mark} {path}")
    typer.echo("")
    typer.echo(diff, nl=False)
    if unresolved:
        typer.secho(f"\n{len(unresolved)} file(s) would need a hand after the update.", fg="yellow")
        return exit_codes.CONFLICTS
    typer.echo("\nNothing was changed.")
    return exit_codes.OK


def _run_copier_update(root: Path, vcs_ref: str | None) -> None:
    # Imported here: copier is slow to import and only this command needs it.
    from copier import Settings, run_update
    from copier.errors import CopierError, DirtyLocalWarning

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DirtyLocalWarning)
        try:
            run_update(
                root,
                vcs_ref=vcs_ref,
                settings=Settings(),
                overwrite=True,
                skip_answered=True,
                defaults=True,
                conflict="inline",
                unsafe=False,
                quiet=True,
            )
        except CopierError as error:
            raise UpdateFailedError(project=root, reason=str(error)) from None


def _tracked_user_files(project: GeneratedProject) -> list[str]:
    package = str(project.answers.get("package_name", ""))
    dirs = [pattern.format(package=package) for pattern in USER_OWNED_DIRS]
    listed = git(project.root, "ls-files", "-z", "--", *dirs)
    return [name for name in listed.split("\0") if name]


def _restore_removed(root: Path, files: list[str]) -> list[str]:
    """Put back user-owned files the update removed; return them."""
    removed = [name for name in files if not (root / name).exists()]
    if removed:
        git(root, "checkout", "HEAD", "--", *removed)
    return removed


def _report_unresolved(paths: list[str], *, done: str) -> None:
    typer.secho(f"\n{done}, but {len(paths)} file(s) need a hand:", fg="yellow", err=True)
    for path in paths:
        how = (
            f"merge the rejected hunks into {PurePosixPath(path).with_suffix('')}, then delete it"
            if path.endswith(".rej")
            else "resolve the <<<<<<< / >>>>>>> blocks"
        )
        typer.secho(f"  {path}: {how}", fg="yellow", err=True)
    typer.secho(
        "Then run the tests and commit. The pre-commit hooks refuse markers and .rej files.",
        fg="yellow",
        err=True,
    )
