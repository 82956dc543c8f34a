"""Build hook: ship the template's git history with the sdist and the wheel.

`workergen update`, `check` and `diff` read the template's releases and past
versions from git history, with no network and no checkout. A checkout has
its own; an installed wheel has `workergen/_template/history.bundle` (a git
bundle of this repository's commits up to the one built) and
`workergen/_template/template-version` (the name of the template version the
wheel ships, which `workergen new` records). Both are made here from the
repository's git history; an sdist carries them in `template-history/`, so a
wheel built from the sdist ships the same. The wheel also ships the template
compiled (`workergen/_template/compiled/`, see `workergen.shipped_compile`),
when copier is installed where it is built.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

SDIST_DIR = "template-history"
FILES = ("history.bundle", "template-version")


class CustomBuildHook(BuildHookInterface):
    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        if self.target_name == "wheel" and version == "editable":
            return  # an editable install reads the checkout's own history
        root = Path(self.root)
        shipped = root / SDIST_DIR
        if (root / ".git").exists():
            self._scratch = Path(tempfile.mkdtemp(prefix="workergen-build-"))
            source = _make_history(root, self._scratch)
        elif all((shipped / name).is_file() for name in FILES):
            source = shipped
        else:
            raise RuntimeError(
                "workergen is built from a git clone of its repository (or from its sdist): "
                "the wheel ships the template's git history, and none was found here"
            )
        destination = SDIST_DIR if self.target_name == "sdist" else "workergen/_template"
        for name in FILES:
            build_data["force_include"][str(source / name)] = f"{destination}/{name}"
        if self.target_name == "wheel":
            compiled = self._compile_template(root)
            if compiled is not None:
                build_data["force_include"][str(compiled)] = f"{destination}/compiled"

    def _compile_template(self, root: Path) -> Path | None:
        """The template compiled as a first `workergen new` compiles it; None without copier."""
        try:
            import copier  # noqa: F401
        except ImportError:
            self.app.display_warning(
                "copier is not installed where this wheel is built: the wheel ships no "
                "compiled template, and a first `workergen new` compiles it"
            )
            return None
        self._compile_scratch = Path(tempfile.mkdtemp(prefix="workergen-compile-"))
        sys.path.insert(0, str(root / "generator"))
        try:
            from workergen.shipped_compile import compile_template
            from workergen.template_source import TemplateSource
        finally:
            sys.path.pop(0)
        if (root / ".git").exists():
            # The working tree, as `workergen new` renders a checkout (it is clean: see above).
            source = TemplateSource(path=root, vcs_ref="HEAD", history=root)
        else:
            source = TemplateSource(path=root)
        return compile_template(source, self._compile_scratch)

    def finalize(self, version: str, build_data: dict[str, Any], artifact_path: str) -> None:
        for scratch in (getattr(self, "_scratch", None), getattr(self, "_compile_scratch", None)):
            if scratch is not None:
                shutil.rmtree(scratch, ignore_errors=True)


def _make_history(root: Path, scratch: Path) -> Path:
    sys.path.insert(0, str(root / "generator"))
    try:
        from workergen.releases import TEMPLATE_PATHS, read_history
    finally:
        sys.path.pop(0)
    shallow = subprocess.run(
        ["git", "-C", str(root), "rev-parse", "--is-shallow-repository"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    if shallow.strip() == "true":
        raise RuntimeError(
            "this clone is shallow, and the wheel ships the template's whole history: "
            "run `git fetch --unshallow` (or check out with fetch-depth: 0) and build again"
        )
    dirty = subprocess.run(
        ["git", "-C", str(root), "status", "--porcelain", "--", *TEMPLATE_PATHS],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    if dirty.strip():
        raise RuntimeError(
            "the template has uncommitted changes (copier.yml or template/): commit them "
            "first, so that the version the wheel records is the one it ships\n" + dirty
        )
    subprocess.run(
        ["git", "-C", str(root), "bundle", "create", "--quiet", str(scratch / FILES[0]), "HEAD"],
        check=True,
    )
    history = read_history(root, source=str(root))
    (scratch / FILES[1]).write_text(history.describe(history.head).name + "\n", encoding="utf-8")
    return scratch
