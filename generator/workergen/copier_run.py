"""Every call workergen makes into copier, with the settings they all share.

Copier runs unattended (`defaults=True`: the answers are collected and checked
before), never runs the template's tasks (`unsafe=False`), and ignores the
user's copier settings file (`Settings()`), so the same answers always render
the same files. Copier is imported here only: it is slow to import, and
`workergen --help` must not pay for it.

A new project is rendered by `FreshRender`, copier's own worker minus costs
that buy nothing when every file is new: compiling the same Jinja source again
for each part of each path (hundreds per project, most of them plain names,
which render as themselves without compiling); building the render context
anew for each of them once the answers are final; asking git whether a
template directory is a git bundle (a directory never is), and whether a
directory without `.git` is the top of a repository; and asking git, once
per file written, whether the file's index entry needs its executable bit fixed
(a fresh render's files are in no index). What it compiles is kept on disk, in
the user's cache directory, for the next render; a wheel ships the template
compiled for the first one (`workergen.shipped_compile`). The files written
are the same.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from workergen.errors import WorkergenError
from workergen.jinja_cache import reuse_compiled

GIT_LOCATION_VARIABLES = frozenset({"GIT_DIR", "GIT_WORK_TREE"})
"""Variables that put a repository's work tree where git would not find it by `.git`."""


class CopierFailedError(WorkergenError):
    """Copier (or the template's Jinja) stopped; `reason` says why, in copier's words."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(reason)


def copy_template(
    src_path: str | Path,
    destination: Path,
    answers: Mapping[str, Any],
    *,
    vcs_ref: str | None,
    pretend: bool = False,
    overwrite: bool = False,
    quiet: bool = True,
) -> None:
    """Render the template at `src_path` (version `vcs_ref`) into `destination`.

    A pretend run lists on stderr what it would write, and writes nothing.
    """
    with (
        _copier() as copier,
        fresh_render_class()(
            src_path=str(src_path),
            dst_path=destination,
            data=dict(answers),
            vcs_ref=vcs_ref,
            settings=_settings(copier),
            defaults=True,
            unsafe=False,
            overwrite=overwrite,
            cleanup_on_error=False,
            quiet=quiet and not pretend,
            pretend=pretend,
        ) as worker,
    ):
        worker.run_copy()


def update_project(root: Path, *, vcs_ref: str, answers_file: str | None = None) -> None:
    """Update the project at `root` to `vcs_ref` of the template its answers file names.

    `answers_file` names another answers file than the template's (`workergen add`'s).

    Recorded answers are kept, new questions take their defaults, and
    conflicts are left inline (`<<<<<<< before updating`).
    """
    with _copier() as copier:
        copier.run_update(
            root,
            vcs_ref=vcs_ref,
            answers_file=answers_file,
            settings=copier.Settings(),
            overwrite=True,
            skip_answered=True,
            defaults=True,
            conflict="inline",
            unsafe=False,
            quiet=True,
        )


def _settings(copier: Any) -> Any:
    """Empty settings, in the form copier's worker takes them (as `run_copy` converts them)."""
    from copier import _main

    settings = copier.Settings()
    model = getattr(_main, "SettingsModel", None)
    if model is None or isinstance(settings, model):
        return settings
    return model(defaults=settings.defaults, trust=settings.trust)


_fresh_render_class: type | None = None


def fresh_render_class() -> type:
    """`FreshRender`: copier's worker for rendering a project from zero (imports copier)."""
    global _fresh_render_class
    if _fresh_render_class is None:
        _fresh_render_class = _make_fresh_render_class()
    return _fresh_render_class


def _make_fresh_render_class() -> type:
    from functools import cached_property

    from copier._main import Worker
    from copier._template import Template
    from copier._types import LazyDict, Phase
    from copier._vcs import is_git_available, is_git_repo_root

    class DirectoryTemplate(Template):  # type: ignore[misc]
        @cached_property
        def vcs(self) -> str | None:
            # For a local directory copier also asks whether it is a git bundle,
            # with a scratch repository and two git processes; a directory never is.
            path = Path(self.url)
            if not (path.is_absolute() and path.is_dir()):
                return super().vcs  # type: ignore[no-any-return]
            if not (path / ".git").exists() and not GIT_LOCATION_VARIABLES & os.environ.keys():
                # The top of a work tree holds `.git`, unless the environment names the
                # repository or the tree elsewhere: no git process to ask (the installed
                # template, a checkout's snapshot).
                return None
            return "git" if is_git_available() and is_git_repo_root(path) else None

    class FreshRender(Worker):  # type: ignore[misc]
        _frozen_context: dict[str, Any] | None = None

        @cached_property
        def jinja_env(self) -> Any:
            env = super().jinja_env
            return reuse_compiled(env)

        @cached_property
        def template(self) -> Any:
            result = DirectoryTemplate(
                url=str(self.src_path),
                ref=self.resolved_vcs_ref,
                use_prereleases=self.use_prereleases,
            )
            self._cleanup_hooks.append(result._cleanup)
            return result

        def _render_template(self) -> None:
            # The answers are final from here on, so the render context is too:
            # copier builds it anew for every part of every path (hundreds of times).
            self._frozen_context = super()._render_context()
            try:
                super()._render_template()
            finally:
                self._frozen_context = None

        def _render_context(self) -> Any:
            frozen = self._frozen_context
            if frozen is None or frozen["_copier_phase"] != Phase.current():
                return super()._render_context()
            # Each caller gets its own copy: copier edits `_copier_conf` in place.
            conf = frozen["_copier_conf"]
            copied = LazyDict({key: (lambda key=key: conf[key]) for key in conf})
            return {**frozen, "_copier_conf": copied}

        def _sync_git_index_executable_bit(self, *args: Any, **kwargs: Any) -> None:
            # Copier fixes the executable bit of a file's existing git index entry;
            # the files of a fresh render (in a new directory) have none.
            return None

    return FreshRender


@contextmanager
def _copier() -> Iterator[Any]:
    import copier
    from copier.errors import CopierError, DirtyLocalWarning
    from jinja2 import TemplateError

    failures: tuple[type[BaseException], ...] = (CopierError, TemplateError, ValueError)
    with warnings.catch_warnings():
        # Rendering an editable install's uncommitted template is the point.
        warnings.simplefilter("ignore", DirtyLocalWarning)
        try:
            yield copier
        except failures as error:
            raise CopierFailedError(str(error) or type(error).__name__) from error


def failure_reason(error: BaseException) -> str | None:
    """Why copier failed, if `error` is copier's (or a file the render could not write)."""
    if isinstance(error, CopierFailedError):
        return error.reason
    if isinstance(error, OSError):
        return str(error)
    return None
