"""Where the template that workergen renders and updates from lives, and its history.

An installed wheel ships copier.yml and template/ as `workergen/_template/`,
with the template's git history as a bundle (`history.bundle`) and the name
of the version it holds (`template-version`), both made when the wheel is
built. An editable install renders the repository itself: the directory
holding copier.yml, two levels above this package (`generator/workergen/`),
whose own git history is the template's.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from workergen.errors import TemplateNotFoundError, TemplateRepositoryError
from workergen.releases import (
    TemplateHistory,
    TemplateVersion,
    clone_history,
    read_history,
    working_tree_files,
)

_PACKAGE_DIR = Path(__file__).resolve().parent
HISTORY_BUNDLE = "history.bundle"
VERSION_FILE = "template-version"


@dataclass(frozen=True)
class TemplateSource:
    """A template directory (the one holding copier.yml) and how copier should read it."""

    path: Path
    vcs_ref: str | None = None
    """`HEAD` for a git checkout, so that copier renders the working tree
    (uncommitted edits included) instead of the latest tag; None otherwise."""
    history: Path | None = None
    """The template's git history: the checkout itself, or the wheel's bundle."""

    @property
    def copier_yml(self) -> Path:
        """The template's copier.yml, which holds its questions."""
        return self.path / "copier.yml"

    @property
    def is_checkout(self) -> bool:
        return self.history is not None and self.history.is_dir()

    def describe(self) -> str | None:
        """The name of the template version this source holds, as a project records it.

        None for a plain directory, which has no history.
        """
        if self.history is None:
            return None
        if self.is_checkout:
            assert self.history is not None
            history = read_history(self.history, source=str(self.history))
            return history.describe(history.head).name
        version_file = self.path / VERSION_FILE
        try:
            return version_file.read_text(encoding="utf-8").strip()
        except OSError as error:
            raise TemplateRepositoryError(
                source=str(self.path), reason=f"{version_file.name}: {error.strerror}"
            ) from None

    @contextmanager
    def without_clone(self) -> Iterator[TemplateSource]:
        """This source in a form copier renders without cloning it, for the `with` block.

        A checkout rendered at HEAD means its working tree, uncommitted edits
        included; copier would clone the checkout and commit the edits in the
        clone. The same files (`working_tree_files`) are linked, or copied, into
        a scratch directory instead, which copier renders as a plain directory.
        Any other source is given as it is.
        """
        if not (self.is_checkout and self.vcs_ref == "HEAD"):
            yield self
            return
        with tempfile.TemporaryDirectory(prefix="workergen-template-") as scratch:
            tree = Path(scratch)
            for name in working_tree_files(self.path):
                _link_or_copy(self.path / name, tree / name)
            yield TemplateSource(path=tree)

    def clone_history(self, destination: Path) -> TemplateHistory:
        """A clone of the template's history (with a tag for each release) in `destination`."""
        if self.history is None or not self.history.exists():
            raise TemplateRepositoryError(
                source=str(self.path), reason=f"it ships no {HISTORY_BUNDLE}"
            )
        label = (
            f"the workergen checkout {self.history}"
            if self.is_checkout
            else f"the template history shipped with workergen ({self.history})"
        )
        return clone_history(str(self.history), destination, label=label)


def _link_or_copy(source: Path, destination: Path) -> None:
    """A hard link to `source` (a copy across file systems), as `destination`."""
    destination.parent.mkdir(parents=True, exist_ok=True)
    if source.is_symlink():
        destination.symlink_to(os.readlink(source))
        return
    try:
        os.link(source, destination)
    except OSError:
        shutil.copy2(source, destination)


def template_candidates(package_dir: Path = _PACKAGE_DIR) -> tuple[Path, ...]:
    """The places the template may be, in the order they are tried."""
    return (package_dir / "_template", package_dir.parent.parent)


def locate_template(package_dir: Path = _PACKAGE_DIR) -> TemplateSource:
    """Find the template shipped with this workergen (wheel first, then the repository)."""
    for candidate in template_candidates(package_dir):
        if (candidate / "copier.yml").is_file():
            if (candidate / ".git").exists():
                return TemplateSource(path=candidate, vcs_ref="HEAD", history=candidate)
            return TemplateSource(path=candidate, history=candidate / HISTORY_BUNDLE)
    raise TemplateNotFoundError(searched=template_candidates(package_dir))


def open_history(template: str | None, destination: Path) -> TemplateHistory:
    """The history of `template` (an address, a path or a bundle), or of the installed one."""
    if template is None:
        return locate_template().clone_history(destination)
    local = Path(template).expanduser()
    return clone_history(str(local.resolve()) if local.exists() else template, destination)


def chosen_version(
    history: TemplateHistory, vcs_ref: str | None, *, installed: bool
) -> TemplateVersion:
    """The version `new` renders and `update` updates to.

    `vcs_ref` if given; else the installed template (the history's newest
    commit) or, for a history given with --template, its newest release.
    """
    if vcs_ref is not None:
        return history.version(vcs_ref, recorded=False)
    latest = None if installed else history.latest_release()
    return history.describe(latest.commit if latest else history.head)


@contextmanager
def history_of(template: str | None) -> Iterator[TemplateHistory]:
    """The history of `template`, or of the installed template, for the `with` block."""
    with tempfile.TemporaryDirectory(prefix="workergen-") as scratch:
        yield open_history(template, Path(scratch) / "template")
