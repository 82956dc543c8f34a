"""`workergen update`: bring template changes into the project, and say what needs a hand.

The template comes from the installed workergen (its checkout, or the history
its wheel ships), or from `--template`; never from the network unless asked.
Copier does the update (a three-way merge of the template's changes into the
project) on a throwaway clone of the project, whose answers file points
copier at that history; the resulting change is then applied to the project
in one step, so a failed update writes nothing. workergen adds what copier
leaves out: it refuses to start on a dirty tree with the reason, never lets the
update delete a user-owned file, keeps a template file the user edited that the
new version no longer ships (copier deletes it, edited or not), carries a project
made before the runtime library over to it (`workergen.core_migration`), and lists
every file left with conflict markers or a `.rej` file, or kept for the user to
look at, exiting non-zero, because copier itself exits 0 then.
"""

from __future__ import annotations

import subprocess
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Annotated

import typer

from workergen import core_migration, exit_codes
from workergen.commands.diff import render_version
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
from workergen.runtime_source import install_command
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
class KeptEdit:
    """A template file the user edited (or added to `core/`) that the new version drops."""

    path: str
    """Where it was, relative to the project."""
    kept_as: str
    """Where the update leaves it: the same path, or `<package>/core_local/...`."""
    added: bool = False
    """Whether the user added the file (to `<package>/core/`) rather than edited it."""

    def how(self) -> str:
        """What the user should do with it."""
        if self.kept_as == self.path:
            return (
                "you edited it and the new template version no longer ships it; kept as "
                "you left it: delete it once nothing needs it"
            )
        what = "your own" if self.added else "your edit of"
        return (
            f"{what} {self.path}, kept here: the workergen-runtime package replaces core/, "
            "so it no longer takes effect; carry it over (docs/updating.md), then delete it"
        )


@dataclass(frozen=True)
class RuntimeMove:
    """What the update did to carry a project with `<package>/core/` over to the runtime."""

    package: str
    rewritten: list[str]
    """Python files whose imports of `<package>.core` now name the runtime."""
    mentions: list[str]
    """Other files that still name `<package>.core`, for the user to check."""


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
    added: list[str]
    """Files of `changed` the update creates."""
    removed: list[str]
    """Files of `changed` the update deletes."""
    gone_dirs: list[str]
    """The directories it deletes whole (the outermost ones), listed as one line each."""
    unresolved: list[str]
    kept: list[str]
    kept_edits: list[KeptEdit]
    moved: RuntimeMove | None


def update(
    vcs_ref: VcsRef = None, pretend: UpdatePretend = False, template: HistoryOption = None
) -> None:
    """Update the project to the installed template (or --vcs-ref, or --template).

    Exit codes: 0 updated cleanly (or nothing to do), 11 files need a hand
    (conflict markers, .rej files, or edits kept from files the new version no
    longer ships; listed), 1 an error (dirty tree, not a project, unknown
    template version, ...).
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
    answers = read_answers(root, project.answers_file)
    answers["_src_path"] = str(history.path)
    answers["_commit"] = base.commit
    write_answers(root, answers, project.answers_file)
    git(clone, *_SCRATCH_GIT, "commit", "--quiet", "--no-verify", "--all", "-m", "base")

    package = str(project.answers.get("package_name", ""))
    user_files = _tracked_user_files(root, package)
    folders = _folders(root)
    try:
        update_project(root, vcs_ref=target.commit, answers_file=project.answers_file)
    except CopierFailedError as error:
        raise UpdateFailedError(project=project.root, reason=error.reason) from None
    kept = _restore_removed(root, user_files)
    kept_edits = _keep_edits(root, history, base, project, package, scratch / "base")
    moved = None
    if package and core_migration.leaves_core(history, base.commit, target.commit):
        kept_edits += _keep_core_leftovers(root, package)
        rewritten = core_migration.rewrite_imports(root, package)
        moved = RuntimeMove(
            package=package,
            rewritten=rewritten,
            mentions=core_migration.mentions(root, package, skip=rewritten),
        )
    provenance = Provenance(str(project.provenance.src_path), commit=target.name)
    record_provenance(root, provenance, project.answers_file)

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
    # A removed file is named, not printed (-D): its text is in the last commit.
    diff = git(root, "diff", "--cached", "--relative", "--irreversible-delete", "HEAD~1")
    status = git(
        root, "diff", "--cached", "--relative", "--no-renames", "--name-status", "-z", "HEAD~1"
    )
    fields = status.split("\0")
    changes = dict(zip(fields[1::2], fields[0::2], strict=False))
    changed = sorted(changes)
    return UpdateResult(
        top=top,
        patch=patch,
        diff=diff,
        changed=changed,
        added=sorted(name for name, code in changes.items() if code == "A"),
        removed=sorted(name for name, code in changes.items() if code == "D"),
        gone_dirs=_outermost(folder for folder in folders if not (root / folder).is_dir()),
        unresolved=unresolved,
        kept=kept,
        kept_edits=kept_edits,
        moved=moved,
    )


def _keep_edits(
    root: Path,
    history: TemplateHistory,
    base: TemplateVersion,
    project: GeneratedProject,
    package: str,
    scratch: Path,
) -> list[KeptEdit]:
    """Put back the template files the update removed that the user had edited.

    Copier deletes a file the new template version no longer ships even if the user
    edited it. Each such file is compared with the version the project records,
    rendered with its answers; an edited one is written back (a file of
    `<package>/core/` under `<package>/core_local/`, see `workergen.core_migration`).
    """
    tracked = git(root, "ls-files", "-z")
    names = dict.fromkeys(name for name in tracked.split("\0") if name)
    removed = [name for name in names if not (root / name).exists()]
    if not removed:
        return []
    rendered, _ = render_version(history, base, project.user_answers, scratch)
    edits = []
    for name in removed:
        mine = _committed(root, name)
        template = rendered / name
        if template.is_file() and template.read_bytes() == mine:
            continue
        kept_as = core_migration.free_location(root, core_migration.kept_location(name, package))
        _write(root / kept_as, mine)
        edits.append(KeptEdit(path=name, kept_as=kept_as))
    return edits


def _keep_core_leftovers(root: Path, package: str) -> list[KeptEdit]:
    """Move the user's own files out of `<package>/core/`, which copier leaves behind."""
    edits = []
    for name in core_migration.leftover_core_files(root, package):
        kept_as = core_migration.free_location(root, core_migration.kept_location(name, package))
        (root / kept_as).parent.mkdir(parents=True, exist_ok=True)
        (root / name).rename(root / kept_as)
        edits.append(KeptEdit(path=name, kept_as=kept_as, added=True))
    core_migration.remove_empty_dirs(root / package / "core")
    return edits


def _folders(root: Path) -> set[str]:
    """The directories holding the files git tracks under `root`, relative to it."""
    folders = set()
    for name in git(root, "ls-files", "-z").split("\0"):
        parent = PurePosixPath(name).parent
        while name and parent != PurePosixPath("."):
            folders.add(parent.as_posix())
            parent = parent.parent
    return folders


def _outermost(folders: Iterable[str]) -> list[str]:
    """`folders` without those inside another of them, sorted."""
    found: list[str] = []
    for folder in sorted(folders):
        if not any(folder.startswith(f"{outer}/") for outer in found):
            found.append(folder)
    return found


def _committed(root: Path, name: str) -> bytes:
    """The content of `name` (relative to `root`) at the clone's HEAD."""
    return subprocess.run(
        ["git", "-C", str(root), "show", f"HEAD:./{name}"], capture_output=True, check=True
    ).stdout


def _write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


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
    _report_runtime_move(result)
    hand = _needing_a_hand(result)
    if hand:
        _report_unresolved(hand, done=f"Updated to {target.name}", hooks=bool(result.unresolved))
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
    _report_runtime_move(result, pretend=True)
    typer.echo("")
    typer.echo(result.diff, nl=False)
    hand = _needing_a_hand(result)
    if hand:
        typer.secho(f"\n{len(hand)} file(s) would need a hand after the update.", fg="yellow")
        for path, how in hand:
            typer.secho(f"  {path}: {how}", fg="yellow")
        return exit_codes.CONFLICTS
    typer.echo("\nNothing was changed.")
    return exit_codes.OK


def _list_changes(result: UpdateResult) -> None:
    shown: set[str] = set()
    for path in sorted({*result.changed, *result.unresolved}):
        folder = next((d for d in result.gone_dirs if path.startswith(f"{d}/")), None)
        if folder is not None:
            if folder not in shown:
                shown.add(folder)
                count = sum(1 for name in result.removed if name.startswith(f"{folder}/"))
                files = "file" if count == 1 else "files"
                typer.echo(f"  removed  {folder}/ ({count} {files})")
            continue
        if path in result.unresolved:
            mark = typer.style("conflict", fg="red")
        elif path in result.removed:
            mark = "removed "
        elif path in result.added:
            mark = "added   "
        else:
            mark = "changed "
        typer.echo(f"  {mark} {path}")


def _report_runtime_move(result: UpdateResult, *, pretend: bool = False) -> None:
    move = result.moved
    if move is None:
        return
    package = move.package
    gone = "would go" if pretend else "is gone"
    typer.echo(
        f"\nThe worker runtime is now the workergen-runtime package: {package}/core/ {gone}, "
        "and the project depends on the runtime (pyproject.toml)."
    )
    for path in move.rewritten:
        typer.echo(f"  imports  {path}: {package}.core -> {core_migration.RUNTIME_PACKAGE}")
    if move.rewritten:
        typer.echo("  (`ruff check --fix` sorts the rewritten imports where needed)")
    for path in move.mentions:
        typer.echo(f"  check    {path}: it still names {package}.core or {package}/core/")
    if not pretend:
        typer.echo(
            f"Reinstall the project in its environment before running it: {install_command()}"
        )


def _needing_a_hand(result: UpdateResult) -> list[tuple[str, str]]:
    hand = [(path, _how_to_resolve(path)) for path in result.unresolved]
    hand += [(edit.kept_as, edit.how()) for edit in result.kept_edits]
    return hand


def _how_to_resolve(path: str) -> str:
    if path.endswith(".rej"):
        merged = PurePosixPath(path).with_suffix("")
        return f"merge the rejected hunks into {merged}, then delete it"
    return "resolve the <<<<<<< / >>>>>>> blocks"


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


def _report_unresolved(hand: list[tuple[str, str]], *, done: str, hooks: bool) -> None:
    typer.secho(f"\n{done}, but {len(hand)} file(s) need a hand:", fg="yellow", err=True)
    for path, how in hand:
        typer.secho(f"  {path}: {how}", fg="yellow", err=True)
    then = "Then run the tests and commit."
    if hooks:
        then += " The pre-commit hooks refuse markers and .rej files."
    typer.secho(then, fg="yellow", err=True)
