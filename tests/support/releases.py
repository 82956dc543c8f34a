"""This repository as a user gets it: a git clone without tags, releases, installs.

Everything here works offline: clones are local, wheels are built without
build isolation, and installs take workergen and its runtime from the wheels
or the clone given, and every other dependency from the test suite's own
environment.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import sysconfig
from collections.abc import Callable
from pathlib import Path

import pytest
from packaging.version import Version

REPO_ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent

# A template fix of each kind: a file the user may have edited (README.md), a
# template-owned module the user never touches (<package>/app.py), and a file
# the user owns once it exists (it must not reach projects).
README_FIX = "Requires Python 3.11 or newer.\n"
APP_FIX = '"""The Celery app of the project, for `celery -A <package>.app ...`."""'
APP_FILE = "{{package_name}}/app.py"
Edit = tuple[str, Callable[[str], str]]


def fix_readme(text: str) -> str:
    return text.replace("## Set up\n\n", f"## Set up\n\n{README_FIX}\n", 1)


def fix_app(text: str) -> str:
    """The app module with a new first docstring line."""
    first, rest = text.split("\n", 1)
    assert first.startswith('"""'), first
    return f"{APP_FIX}\n{rest}"


TEMPLATE_FIXES: tuple[Edit, ...] = (
    ("README.md.jinja", fix_readme),
    (APP_FILE, fix_app),
    ("{{package_name}}/jobs/hello.py.jinja", lambda text: text + "\n# new in the template\n"),
)

# Where a release's version is written (scripts/release.sh); all must agree.
GENERATOR_INIT = "generator/workergen/__init__.py"
RUNTIME_INIT = "runtime/src/workergen_runtime/__init__.py"
TEMPLATE_PYPROJECT = "template/pyproject.toml.jinja"


def runtime_range(version: str) -> str:
    """The runtime versions a project of template `version` accepts: its minor release."""
    parsed = Version(version)
    lowest = version if parsed.is_prerelease else f"{parsed.major}.{parsed.minor}"
    return f">={lowest},<{parsed.major}.{parsed.minor + 1}"


def release_versions(repo: Path) -> dict[str, str]:
    """The version each place holds: the two packages', the generator's pin, the range."""

    def found(path: str, pattern: str) -> str:
        match = re.search(pattern, (repo / path).read_text(), re.MULTILINE)
        assert match, f"{path} holds no {pattern}"
        return match[1]

    return {
        "generator": found(GENERATOR_INIT, r'^__version__ = "([^"]+)"$'),
        "runtime": found(RUNTIME_INIT, r'^__version__ = "([^"]+)"$'),
        "pin": found("pyproject.toml", r'"workergen-runtime==([^"]+)"'),
        "range": found(TEMPLATE_PYPROJECT, r'^    "workergen-runtime\{\{.*\}\}([^"]+)",$'),
    }


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


@pytest.fixture(autouse=True)
def git_identity(monkeypatch: pytest.MonkeyPatch) -> None:
    """A git that ignores this machine's configuration and can commit."""
    for name, value in git_env().items():
        if name.startswith("GIT_"):
            monkeypatch.setenv(name, value)


def clone_repository(destination: Path) -> Path:
    """A `git clone` of this repository's committed HEAD, with no tags at all."""
    git(destination.parent, "clone", "-q", "--no-hardlinks", str(REPO_ROOT), str(destination))
    tags = git(destination, "tag", "--list").split()
    if tags:
        git(destination, "tag", "-d", *tags)
    return destination


def make_release(
    clone: Path, version: str, *edits: Edit, build: bool = False
) -> subprocess.CompletedProcess[str]:
    """Commit template edits in `clone`, then release them with the documented command.

    With `build`, the release also builds both distributions into the clone's
    dist/, offline (the build backends of this environment); else `--no-build`.
    """
    for relative, edit in edits:
        path = clone / "template" / relative
        path.write_text(edit(path.read_text()))
    if edits:
        commit_all(clone, "Template: fixes")
    done = subprocess.run(
        ["bash", "scripts/release.sh", version, "--no-isolation" if build else "--no-build"],
        cwd=clone,
        capture_output=True,
        text=True,
        env={**git_env(), "PYTHON": sys.executable},
    )
    assert done.returncode == 0, done.stdout + done.stderr
    # The release is the packages' version too (the wheels built from it say so),
    # and the runtime range of the projects rendered from it.
    assert release_versions(clone) == {
        "generator": version,
        "runtime": version,
        "pin": version,
        "range": runtime_range(version),
    }
    return done


# The suite's own workergen and runtime (editable installs of this checkout):
# hidden from the environments the tests install them into.
OWN_DISTRIBUTIONS = re.compile(r"^(_editable_impl_|__editable__[._])?workergen([-_.].*)?$")


def make_venv(path: Path) -> Path:
    """A virtual environment that sees this suite's installed packages but not workergen.

    Its site-packages lists, in a .pth line, a folder of links to the entries of
    the suite's site-packages but those of workergen and workergen-runtime: the
    other packages import, and pip counts them as installed, so an offline
    install resolves workergen's dependencies and takes workergen and its runtime
    from the wheels (or the checkout) it is given. The .pth files among the
    links are not read.
    """
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(path)], check=True)
    python = path / "bin" / "python"
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    suite = path / "suite-packages"
    suite.mkdir()
    for entry in Path(sysconfig.get_paths()["purelib"]).iterdir():
        if not OWN_DISTRIBUTIONS.match(entry.name):
            (suite / entry.name).symlink_to(entry)
    Path(purelib, "suite-packages.pth").write_text(f"{suite}\n")
    return path


def pip_install(venv: Path, *args: str, deps: bool = False) -> None:
    """`pip install ARGS` into `venv`, offline; `deps`: resolve the dependencies too.

    Without `deps`, nothing but what ARGS name is installed.
    """
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(venv / "bin" / "python"),
            "install",
            "--quiet",
            *(() if deps else ("--no-deps",)),
            "--no-index",
            "--no-build-isolation",
            *args,
        ],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def build_dists(clone: Path, out: Path) -> tuple[Path, Path]:
    """Build both distributions of `clone` into `out` with scripts/build.sh, offline.

    Returns the two wheels: workergen's and the runtime's.
    """
    shutil.rmtree(out, ignore_errors=True)
    done = subprocess.run(
        ["bash", "scripts/build.sh", "--outdir", str(out), "--no-isolation"],
        cwd=clone,
        capture_output=True,
        text=True,
        env={**git_env(), "PYTHON": sys.executable},
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return dist_wheels(out)


def dist_wheels(out: Path) -> tuple[Path, Path]:
    """The wheels of workergen and of workergen-runtime in `out`, one of each."""
    (generator,) = out.glob("workergen-*.whl")
    (runtime,) = out.glob("workergen_runtime-*.whl")
    return generator, runtime


def installed_version(venv: Path, distribution: str) -> tuple[str, Path]:
    """The version of `distribution` installed in `venv`, and where it is."""
    done = subprocess.run(
        [
            str(venv / "bin" / "python"),
            "-c",
            "import sys; from importlib.metadata import distribution as d; "
            "found = d(sys.argv[1]); print(found.version); print(found.locate_file(''))",
            distribution,
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    version, where = done.stdout.splitlines()
    return version, Path(where)


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


def project_tests_pass(project: Path, python: Path = Path(sys.executable)) -> None:
    """The project's own tests pass, run by `python` (the suite's by default)."""
    done = subprocess.run(
        [str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider"],
        cwd=project,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
    )
    assert done.returncode == 0, done.stdout + done.stderr
