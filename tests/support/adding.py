"""Driving `workergen add` in a folder, for the tests of each kind of project."""

from __future__ import annotations

import os
from pathlib import Path

from typer.testing import CliRunner

from workergen.cli import app

runner = CliRunner()


def run(cwd: Path, *args: str, input: str | None = None):
    old = Path.cwd()
    os.chdir(cwd)
    try:
        return runner.invoke(app, list(args), input=input)
    finally:
        os.chdir(old)


def snapshot(root: Path) -> dict[str, bytes]:
    """Every file under `root` (git's own files left out) and its bytes."""
    return {
        path.relative_to(root).as_posix(): path.read_bytes()
        for path in sorted(root.rglob("*"))
        if path.is_file() and ".git" not in path.relative_to(root).parts
    }
