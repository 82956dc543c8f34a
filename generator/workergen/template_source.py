"""Where the template that `workergen new` renders lives.

An installed wheel ships copier.yml and template/ as `workergen/_template/`.
An editable install renders the repository itself: the directory holding
copier.yml, two levels above this package (`generator/workergen/`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from workergen.errors import TemplateNotFoundError

_PACKAGE_DIR = Path(__file__).resolve().parent


@dataclass(frozen=True)
class TemplateSource:
    """A template directory (the one holding copier.yml) and how copier should read it."""

    path: Path
    vcs_ref: str | None = None
    """`HEAD` for a git checkout, so that copier renders the working tree
    (uncommitted edits included) instead of the latest tag; None otherwise."""

    @property
    def copier_yml(self) -> Path:
        """The template's copier.yml, which holds its questions."""
        return self.path / "copier.yml"


def template_candidates(package_dir: Path = _PACKAGE_DIR) -> tuple[Path, ...]:
    """The places the template may be, in the order they are tried."""
    return (package_dir / "_template", package_dir.parent.parent)


def locate_template(package_dir: Path = _PACKAGE_DIR) -> TemplateSource:
    """Find the template shipped with this workergen (wheel first, then the repository)."""
    for candidate in template_candidates(package_dir):
        if (candidate / "copier.yml").is_file():
            is_checkout = (candidate / ".git").exists()
            return TemplateSource(path=candidate, vcs_ref="HEAD" if is_checkout else None)
    raise TemplateNotFoundError(searched=template_candidates(package_dir))
