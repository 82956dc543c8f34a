"""Where a generated project's worker runtime comes from, before and after publication.

A project depends on `workergen-runtime` from the package index. workergen run from
a checkout of its repository has the runtime installed from that checkout's
`runtime/` folder, which the index may not have yet: the install commands
workergen prints then name that folder.
"""

from __future__ import annotations

import shlex
from pathlib import Path


def checkout_runtime() -> Path | None:
    """The runtime's source folder when it is installed from a checkout, else None."""
    import workergen_runtime

    package = Path(workergen_runtime.__file__).resolve().parent
    root = package.parent.parent
    if package.parent.name == "src" and (root / "pyproject.toml").is_file():
        return root
    return None


def install_command() -> str:
    """The pip command that installs a project (with `[dev]`) and the runtime it needs."""
    runtime = checkout_runtime()
    source = f"-e {shlex.quote(str(runtime))} " if runtime else ""
    return f"python -m pip install {source}-e '.[dev]'"
