"""Run make:job / make:cron through either entry point, and snapshot a project's files."""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from workergen.entry import main as workergen_main

PACKAGE = "billing"
ENTRY_POINTS = ("workergen", "project")


@dataclass
class Outcome:
    exit_code: int
    output: str


def project_copy(rendered: Path, dest: Path) -> Path:
    """A private copy of a rendered project, so a test may add files to it."""
    shutil.copytree(rendered, dest, ignore=shutil.ignore_patterns("__pycache__", ".ruff_cache"))
    return dest


def snapshot(root: Path) -> dict[str, bytes]:
    """Every file under root with its bytes (caches left out)."""
    return {
        str(path.relative_to(root)): path.read_bytes()
        for path in sorted(root.rglob("*"))
        if path.is_file() and "__pycache__" not in path.parts and ".ruff_cache" not in path.parts
    }


def run_workergen(args: Sequence[str]) -> Outcome:
    """Run the `workergen` console script's main in this process, output and errors together."""
    output = io.StringIO()
    code: int | str | None = 0
    with contextlib.redirect_stdout(output), contextlib.redirect_stderr(output):
        try:
            workergen_main(args)
        except SystemExit as stop:
            code = stop.code
    return Outcome(code if isinstance(code, int) else int(code is not None), output.getvalue())


def run_make(entry: str, project: Path, *args: str, cwd: Path | None = None) -> Outcome:
    """Run `make:*` as a user would: `workergen ...` or `python -m billing ...` from cwd."""
    where = cwd or project
    if entry == "workergen":
        with contextlib.chdir(where):
            return run_workergen(args)
    done = subprocess.run(
        [sys.executable, "-m", PACKAGE, *args],
        cwd=where,
        env={**os.environ, "PYTHONPATH": str(project)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    return Outcome(done.returncode, done.stdout + done.stderr)
