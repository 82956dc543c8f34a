"""Every call workergen makes into copier, with the settings they all share.

Copier runs unattended (`defaults=True`: the answers are collected and checked
before), never runs the template's tasks (`unsafe=False`), and ignores the
user's copier settings file (`Settings()`), so the same answers always render
the same files. Copier is imported here only: it is slow to import, and
`workergen --help` must not pay for it.

A new project is rendered by `FreshRender`, copier's own worker minus two costs
that buy nothing when every file is new: compiling the same Jinja source again
for each part of each path (hundreds per project, most of them plain names,
which render as themselves without compiling), and asking git, once per
file written, whether the file's index entry needs its executable bit fixed (a
fresh render's files are in no index). What it compiles is kept on disk, in
the user's cache directory, for the next render. The files written are the same.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import warnings
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from workergen.errors import WorkergenError


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


def update_project(root: Path, *, vcs_ref: str) -> None:
    """Update the project at `root` to `vcs_ref` of the template its answers file names.

    Recorded answers are kept, new questions take their defaults, and
    conflicts are left inline (`<<<<<<< before updating`).
    """
    with _copier() as copier:
        copier.run_update(
            root,
            vcs_ref=vcs_ref,
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

    class FreshRender(Worker):  # type: ignore[misc]
        @cached_property
        def jinja_env(self) -> Any:
            env = super().jinja_env
            env.bytecode_cache = compiled_template_cache(env)
            env.from_string = reuse_compiled(env)
            return env

        def _sync_git_index_executable_bit(self, *args: Any, **kwargs: Any) -> None:
            # Copier fixes the executable bit of a file's existing git index entry;
            # the files of a fresh render (in a new directory) have none.
            return None

    return FreshRender


def reuse_compiled(env: Any) -> Callable[..., Any]:
    """`env.from_string`, compiling each source once, and plain text not at all.

    Copier compiles every part of every path (and the answers file's name, for
    each part) on its own: the same few hundred strings, most of them plain
    names. A compiled template renders any number of times, and a source with
    no Jinja syntax in it renders as itself. The extensions still preprocess
    each source, as they would on compiling it: copier's yield tag resets its
    state there.
    """
    compile_source = env.from_string
    compiled: dict[str, Any] = {}
    syntax = _syntax_markers(env)

    def from_string(source: Any, globals: Any = None, template_class: Any = None) -> Any:
        if globals is not None or template_class is not None or not isinstance(source, str):
            return compile_source(source, globals, template_class)
        preprocessed = env.preprocess(source)
        template = compiled.get(source)
        if template is None:
            if preprocessed == source and not any(marker in source for marker in syntax):
                template = plain_template(env, source)
            elif env.bytecode_cache is not None:
                template = _cached_template(env, source)
            else:
                template = compile_source(source)
            compiled[source] = template
        return template

    return from_string


def _syntax_markers(env: Any) -> tuple[str, ...]:
    """What makes a source more than plain text to `env`; line ends too, which it normalises."""
    markers = (
        env.block_start_string,
        env.variable_start_string,
        env.comment_start_string,
        env.line_statement_prefix,
        env.line_comment_prefix,
        "\n",
        "\r",
    )
    return tuple(marker for marker in markers if marker)


def plain_template(env: Any, text: str) -> Any:
    """A template of `env` that renders as `text`, made without compiling it."""

    def root(context: Any) -> Iterator[str]:
        yield text

    namespace = {"name": None, "__file__": None, "blocks": {}, "root": root, "debug_info": ""}
    return env.template_class.from_module_dict(env, namespace, env.make_globals(None))


def _cached_template(env: Any, source: str) -> Any:
    """`env.from_string(source)`, its compiled code kept in `env.bytecode_cache`."""
    cache = env.bytecode_cache
    name = f"<string {hashlib.sha1(source.encode()).hexdigest()}>"
    bucket = cache.get_bucket(env, name, None, source)
    if bucket.code is None:
        bucket.code = env.compile(source)
        cache.set_bucket(bucket)
    return env.template_class.from_code(env, bucket.code, env.make_globals(None))


def cache_home() -> Path:
    """Where workergen keeps what it may rebuild at any time: $XDG_CACHE_HOME/workergen."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "workergen"


def compiled_template_cache(env: Any) -> Any:
    """A cache on disk of what `env` compiles, for every later render; None if there is none.

    Jinja checks each entry against the template's source, its cache format and
    Python's version. The directory is named after everything else that shapes
    the compiled code: Jinja's and copier's versions and the environment's syntax,
    options, extensions, filters and tests. An entry is named after the template's
    path within the template (or, for a string, its text), not where a render
    reads it from. A template with Jinja extensions of its own is not cached:
    their versions are unknown here.
    """
    from jinja2.bccache import FileSystemBytecodeCache

    settings = _compile_settings(env)
    if settings is None:
        return None

    class TemplateCache(FileSystemBytecodeCache):
        def get_cache_key(self, name: str, filename: str | None = None) -> str:
            return hashlib.sha1(name.encode()).hexdigest()

        def load_bytecode(self, bucket: Any) -> None:
            try:
                super().load_bytecode(bucket)
            except Exception:
                # Damaged: compiled again, and written anew.
                bucket.reset()

        def dump_bytecode(self, bucket: Any) -> None:
            with contextlib.suppress(OSError):
                super().dump_bytecode(bucket)

    digest = hashlib.sha1(repr(settings).encode()).hexdigest()[:16]
    directory = cache_home() / "templates" / digest
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    return TemplateCache(str(directory), "%s.cache")


_KNOWN_EXTENSIONS = ("jinja2.", "copier.", "jinja2_ansible_filters.")
"""Where the extensions copier always loads come from, whose versions are known."""


def _compile_settings(env: Any) -> tuple[Any, ...] | None:
    """What shapes the code `env` compiles a source to; None if that is not known."""
    import copier
    import jinja2

    extensions = sorted(
        f"{type(ext).__module__}.{type(ext).__qualname__}" for ext in env.extensions.values()
    )
    known = all(name.startswith(_KNOWN_EXTENSIONS) for name in extensions)
    if not known or callable(env.autoescape) or env.finalize is not None:
        return None
    return (
        jinja2.__version__,
        copier.__version__,
        type(env).__module__,
        type(env).__qualname__,
        extensions,
        env.block_start_string,
        env.block_end_string,
        env.variable_start_string,
        env.variable_end_string,
        env.comment_start_string,
        env.comment_end_string,
        env.line_statement_prefix,
        env.line_comment_prefix,
        env.trim_blocks,
        env.lstrip_blocks,
        env.newline_sequence,
        env.keep_trailing_newline,
        env.optimized,
        env.is_async,
        env.autoescape,
        sorted(env.filters),
        sorted(env.tests),
    )


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
