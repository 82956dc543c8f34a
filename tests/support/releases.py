"""This repository as a user gets it: a git clone without tags, releases, installs.

Everything here works offline: clones are local, wheels are built without
build isolation, and installs take their dependencies from the test suite's
own environment.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from collections.abc import Callable
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent

# A template fix of each kind: a file the user may have edited, a core module,
# and a file the user owns once it exists (it must not reach projects).
README_FIX = "Requires Python 3.11 or newer.\n"
CORE_FIX = '"""Errors the project raises on purpose (every one carries a message for people)."""'
Edit = tuple[str, Callable[[str], str]]


def fix_readme(text: str) -> str:
    return text.replace("## Set up\n\n", f"## Set up\n\n{README_FIX}\n", 1)


def fix_core_errors(text: str) -> str:
    first, rest = text.split("\n", 1)
    assert first.startswith('"""'), first
    return f"{CORE_FIX}\n{rest}"


TEMPLATE_FIXES: tuple[Edit, ...] = (
    ("README.md.jinja", fix_readme),
    ("{{package_name}}/core/errors.py", fix_core_errors),
    ("{{package_name}}/jobs/hello.py.jinja", lambda text: text + "\n# new in the template\n"),
)


def git_env() -> dict[str, str]:
    """An environment whose git ignores this machine's configuration and can commit."""
    return {
        **os.environ,
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_AUTHOR_NAME": "Test",
        "GIT_AUTHOR_EMAIL": "test@example.com",
        "GIT_COMMITTER_NAME": "Test",
        "GIT_COMMITTER_EMAIL": "test@example.com",
    }


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=cwd, check=True, capture_output=True, text=True, env=git_env()
    ).stdout


def commit_all(cwd: Path, message: str) -> None:
    git(cwd, "add", "-A")
    git(cwd, "commit", "-q", "--no-verify", "-m", message)


def holds_the_template_of(repo: Path, recorded: str, rev: str = "HEAD") -> bool:
    """Whether `recorded` names, in `repo`, a commit with the template of `rev`."""
    commit = git(repo, "rev-parse", "--verify", f"{recorded}^{{commit}}").strip()
    done = subprocess.run(
        ["git", "diff", "--quiet", commit, rev, "--", "copier.yml", "template"], cwd=repo
    )
    return done.returncode == 0


def clone_repository(destination: Path) -> Path:
    """A `git clone` of this repository's committed HEAD, with no tags at all."""
    git(destination.parent, "clone", "-q", "--no-hardlinks", str(REPO_ROOT), str(destination))
    tags = git(destination, "tag", "--list").split()
    if tags:
        git(destination, "tag", "-d", *tags)
    return destination


def make_release(clone: Path, version: str, *edits: Edit) -> subprocess.CompletedProcess[str]:
    """Commit template edits in `clone`, then release them with the documented command."""
    for relative, edit in edits:
        path = clone / "template" / relative
        path.write_text(edit(path.read_text()))
    if edits:
        commit_all(clone, "Template: fixes")
    done = subprocess.run(
        ["bash", "scripts/release.sh", version],
        cwd=clone,
        capture_output=True,
        text=True,
        env=git_env(),
    )
    assert done.returncode == 0, done.stdout + done.stderr
    # The release is the package's version too: the wheel built from it says so.
    init = (clone / "generator" / "workergen" / "__init__.py").read_text()
    assert f'\n__version__ = "{version}"\n' in init
    return done


def make_venv(path: Path) -> Path:
    """A virtual environment that sees this suite's installed packages but not workergen.

    Its site-packages lists the suite's site-packages in a .pth line: those
    packages import, but the .pth files there (the suite's editable workergen,
    which points at the repository) are not read.
    """
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(path)], check=True)
    python = path / "bin" / "python"
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    Path(purelib, "suite-packages.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return path


def pip_install(venv: Path, *args: str) -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(venv / "bin" / "python"),
            "install",
            "--quiet",
            "--no-deps",
            "--no-index",
            "--no-build-isolation",
            *args,
        ],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def build_wheel(clone: Path, out: Path) -> Path:
    """Build the sdist and, from it, the wheel (as `python -m build` does); return the wheel."""
    shutil.rmtree(out, ignore_errors=True)
    done = subprocess.run(
        [sys.executable, "-m", "build", "--no-isolation", "--outdir", str(out), str(clone)],
        capture_output=True,
        text=True,
        env=git_env(),
    )
    assert done.returncode == 0, done.stdout + done.stderr
    (wheel,) = out.glob("workergen-*.whl")
    return wheel


def workergen(
    venv: Path, cwd: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run the `workergen` installed in `venv`, as a user runs it (`env`: more variables)."""
    return subprocess.run(
        [str(venv / "bin" / "workergen"), *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        env={**git_env(), "PYTHONDONTWRITEBYTECODE": "1", **(env or {})},
        timeout=300,
    )


def project_tests_pass(project: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"],
        cwd=project,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
    )
    assert done.returncode == 0, done.stdout + done.stderr
