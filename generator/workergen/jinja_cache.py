"""Compiling a Jinja environment's sources once: once per process, and once for later ones.

Copier and workergen compile every string they render (each part of each path,
each question's default and validator) on its own, and every file of the
template; compiling is most of what rendering a project costs. `reuse_compiled`
keeps what an environment compiled for the rest of the process, renders plain
text without compiling it, and keeps compiled code on disk, in the user's cache
directory, for the next process.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any


def reuse_compiled(env: Any) -> Any:
    """`env`, its compiled code kept on disk and its `from_string` compiling each source once.

    Copier compiles every part of every path (and the answers file's name, for
    each part) on its own: the same few hundred strings, most of them plain
    names. A compiled template renders any number of times, and a source with
    no Jinja syntax in it renders as itself. The extensions still preprocess
    each source, as they would on compiling it: copier's yield tag resets its
    state there.
    """
    env.bytecode_cache = compiled_template_cache(env)
    env.from_string = _compiling_once(env)
    return env


def _compiling_once(env: Any) -> Callable[..., Any]:
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


CACHE_SUBDIR = "templates"
"""The folder of compiled templates, in the user's cache directory and in a wheel's `_template/`."""
SHIPPED = Path(__file__).resolve().parent / "_template" / "compiled"
"""What the wheel's build compiled (`workergen.shipped_compile`); absent from a checkout."""


def cache_home() -> Path:
    """Where workergen keeps what it may rebuild at any time: $XDG_CACHE_HOME/workergen."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "workergen"


def compiled_template_cache(env: Any, shipped: Path = SHIPPED) -> Any:
    """A cache on disk of what `env` compiles, for every later render; None if there is none.

    Jinja checks each entry against the template's source, its cache format and
    Python's version. The directory is named after everything else that shapes
    the compiled code: Jinja's and copier's versions and the environment's syntax,
    options, extensions, filters and tests. An entry is named after the template's
    path within the template (or, for a string, its text), not where a render
    reads it from. An entry missing from the user's cache is read from the same
    directory in `shipped`, if it is there. A template with Jinja extensions of
    its own is not cached: their versions are unknown here.
    """
    from jinja2.bccache import FileSystemBytecodeCache

    settings = _compile_settings(env)
    if settings is None:
        return None

    class TemplateCache(FileSystemBytecodeCache):
        def __init__(self, directory: Path, fallback: Path) -> None:
            super().__init__(str(directory), "%s.cache")
            # Where entries are read from, in turn; written only to the first.
            self.places = [str(directory)] + ([str(fallback)] if fallback.is_dir() else [])

        def get_cache_key(self, name: str, filename: str | None = None) -> str:
            return hashlib.sha1(name.encode()).hexdigest()

        def load_bytecode(self, bucket: Any) -> None:
            for place in self.places:
                try:
                    with open(os.path.join(place, self.pattern % bucket.key), "rb") as entry:
                        bucket.load_bytecode(entry)
                except OSError:
                    continue
                except Exception:
                    # Damaged: compiled again, and written anew.
                    bucket.reset()
                if bucket.code is not None:
                    return

        def dump_bytecode(self, bucket: Any) -> None:
            with contextlib.suppress(OSError):
                super().dump_bytecode(bucket)

    digest = hashlib.sha1(repr(settings).encode()).hexdigest()[:16]
    directory = cache_home() / CACHE_SUBDIR / digest
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    return TemplateCache(directory, shipped / digest)


_KNOWN_EXTENSIONS = ("jinja2.", "copier.", "jinja2_ansible_filters.")
"""The extensions copier always loads: Jinja's and copier's own (their versions are in
the settings) and the Ansible filters (which add filters only, and the settings list them)."""


def _compile_settings(env: Any) -> tuple[Any, ...] | None:
    """What shapes the code `env` compiles a source to; None if that is not known."""
    import jinja2

    extensions = sorted(
        f"{type(ext).__module__}.{type(ext).__qualname__}" for ext in env.extensions.values()
    )
    known = all(name.startswith(_KNOWN_EXTENSIONS) for name in extensions)
    if not known or callable(env.autoescape) or env.finalize is not None:
        return None
    copier = sys.modules.get("copier") if any(n.startswith("copier.") for n in extensions) else None
    return (
        jinja2.__version__,
        # Imported whenever one of its extensions is; not part of an environment without one.
        getattr(copier, "__version__", None),
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
