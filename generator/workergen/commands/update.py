"""`workergen update`: bring template changes into the project, and say what needs a hand.

The template comes from the installed workergen (its checkout, or the history
its wheel ships), or from `--template`; never from the network unless asked.
Copier does the update (a three-way merge of the template's changes into the
project) on a throwaway clone of the project, whose answers file points
copier at that history; the resulting change is then applied to the project
in one step, so a failed update writes nothing. workergen adds what copier
leaves out: it refuses to start on a dirty tree with the reason, never lets the
update delete a user-owned file, and lists every file left with conflict
markers or a `.rej` file, exiting non-zero, because copier itself exits 0 then.
"""

from __future__ import annotations

import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Annotated

import typer

from workergen import exit_codes
from workergen.copier_run import CopierFailedError, update_project
from workergen.errors import UpdateFailedError
from workergen.generated_project import (
    GeneratedProject,
    find_project,
    git,
    require_clean_git,
    unresolved_files,
)
from workergen.options import HistoryOption, VcsRef
from workergen.provenance import Provenance, read_answers, record_provenance, write_answers
from workergen.releases import TemplateHistory, TemplateVersion
from workergen.template_source import chosen_version, history_of

UpdatePretend = Annotated[
    bool,
    typer.Option(
        "--pretend", help="Show what the update would change and where it would conflict."
    ),
]

# Directories (relative to the project) whose files belong to the user once they
# exist; an update never removes them even if the template stops shipping one.
USER_OWNED_DIRS = ("{package}/jobs", "{package}/crons", "tests/jobs", "tests/crons")

_SCRATCH_GIT = ("-c", "user.name=workergen", "-c", "user.email=workergen@localhost")


@dataclass(frozen=True)
class UpdateResult:
    """What the update did on the scratch clone, ready to apply to the project."""

    top: Path
    """The top of the project's git repository (the project or a directory above it)."""
    patch: bytes
    """A binary diff from the project's HEAD, with paths from `top`."""
    diff: str
    """The same change as text, with paths relative to the project."""
    changed: list[str]
    unresolved: list[str]
    kept: list[str]


def update(
    vcs_ref: VcsRef = None, pretend: UpdatePretend = False, template: HistoryOption = None
) -> None:
    """Update the project to the installed template (or --vcs-ref, or --template).

    Exit codes: 0 updated cleanly (or nothing to do), 11 files need a hand
    (conflict markers or .rej files, listed), 1 an error (dirty tree, not a
    project, unknown template version, ...).
    """
    project = find_project(Path.cwd())
    provenance = project.provenance
    require_clean_git(project.root)
    with history_of(template) as history:
        base = history.version(str(provenance.commit))
        target = chosen_version(history, vcs_ref, installed=template is None)
        if history.same_template(base.commit, target.commit):
            lead = "Pretend run: already" if pretend else "Already"
            typer.secho(f"{lead} up to date ({base.name}); nothing to change.", fg="green")
            raise typer.Exit(exit_codes.OK)
        if not pretend:
            typer.echo(f"Updating from {base.name} to {target.name} ({history.source})")
        with tempfile.TemporaryDirectory(prefix="workergen-update-") as scratch:
            result = _update_clone(project, history, base, target, Path(scratch))
    if pretend:
        raise typer.Exit(_report_pretend(result, target))
    _apply(project, result)
    raise typer.Exit(_report(result, target))


def _update_clone(
    project: GeneratedProject,
    history: TemplateHistory,
    base: TemplateVersion,
    target: TemplateVersion,
    scratch: Path,
) -> UpdateResult:
    """Run copier's update on a clone of the project; return the change it made."""
    top = Path(git(project.root, "rev-parse", "--show-toplevel").strip()).resolve()
    subdir = project.root.relative_to(top)
    clone = scratch / "project"
    done = subprocess.run(
        ["git", "clone", "--quiet", "--no-hardlinks", str(top), str(clone)],
        capture_output=True,
        text=True,
    )
    if done.returncode:
        raise UpdateFailedError(project=project.root, reason=done.stderr.strip() or "git clone")
    root = clone / subdir
    # Copier reads both template versions from the answers file: point it at
    # the history, at the commit the project was rendered from.
    answers = read_answers(root)
    answers["_src_path"] = str(history.path)
    answers["_commit"] = base.commit
    write_answers(root, answers)
    git(clone, *_SCRATCH_GIT, "commit", "--quiet", "--no-verify", "--all", "-m", "base")

    user_files = _tracked_user_files(root, str(project.answers.get("package_name", "")))
    try:
        update_project(root, vcs_ref=target.commit)
    except CopierFailedError as error:
        raise UpdateFailedError(project=project.root, reason=error.reason) from None
    kept = _restore_removed(root, user_files)
    record_provenance(root, Provenance(str(project.provenance.src_path), commit=target.name))

    unresolved = unresolved_files(root)
    git(clone, "add", "--all")
    rejects = [path for path in unresolved if path.endswith(".rej")]
    if rejects:
        git(root, "add", "--force", "--", *rejects)
    patch = subprocess.run(
        ["git", "-C", str(clone), "diff", "--cached", "--binary", "HEAD~1"],
        capture_output=True,
        check=True,
    ).stdout
    diff = git(root, "diff", "--cached", "--relative", "HEAD~1")
    names = git(root, "diff", "--cached", "--relative", "--name-only", "-z", "HEAD~1")
    changed = sorted(name for name in names.split("\0") if name)
    return UpdateResult(
        top=top, patch=patch, diff=diff, changed=changed, unresolved=unresolved, kept=kept
    )


def _apply(project: GeneratedProject, result: UpdateResult) -> None:
    if not result.patch:
        return
    done = subprocess.run(
        ["git", "-C", str(result.top), "apply", "--binary", "--whitespace=nowarn", "-"],
        input=result.patch,
        capture_output=True,
    )
    if done.returncode:
        reason = done.stderr.decode(errors="replace").strip().splitlines()
        raise UpdateFailedError(
            project=project.root,
            reason=reason[-1] if reason else "git apply failed",
        )


def _report(result: UpdateResult, target: TemplateVersion) -> int:
    for path in result.kept:
        typer.echo(f"  kept {path} (yours; the new template version no longer ships it)")
    if not result.changed:
        typer.secho(f"Already up to date ({target.name}).", fg="green")
        return exit_codes.OK
    _list_changes(result)
    if result.unresolved:
        _report_unresolved(result.unresolved, done=f"Updated to {target.name}")
        return exit_codes.CONFLICTS
    typer.secho(
        f"Updated to {target.name}. Review with `git diff`, run the tests, then commit.",
        fg="green",
    )
    return exit_codes.OK


def _report_pretend(result: UpdateResult, target: TemplateVersion) -> int:
    if not result.changed:
        typer.echo(f"Pretend run: already up to date ({target.name}); nothing would change.")
        return exit_codes.OK
    typer.echo(f"Pretend run: updating to {target.name} would change:")
    _list_changes(result)
    typer.echo("")
    typer.echo(result.diff, nl=False)
    if result.unresolved:
        count = len(result.unresolved)
        typer.secho(f"\n{count} file(s) would need a hand after the update.", fg="yellow")
        return exit_codes.CONFLICTS
    typer.echo("\nNothing was changed.")
    return exit_codes.OK


def _list_changes(result: UpdateResult) -> None:
    for path in sorted({*result.changed, *result.unresolved}):
        mark = typer.style("conflict", fg="red") if path in result.unresolved else "changed "
        typer.echo(f"  {mark} {path}")


def _tracked_user_files(root: Path, package: str) -> list[str]:
    dirs = [pattern.format(package=package) for pattern in USER_OWNED_DIRS]
    listed = git(root, "ls-files", "-z", "--", *dirs)
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
