"""When `workergen new` asks git about its template, and when it has no need to."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from support.releases import commit_all, git


def a_template(path: Path) -> Path:
    (path / "t").mkdir(parents=True)
    (path / "copier.yml").write_text("_subdirectory: t\nname:\n  type: str\n  default: x\n")
    (path / "t" / "a.txt.jinja").write_text("{{ name }}\n")
    return path


def git_logged(tmp_path: Path) -> tuple[dict[str, str], Path]:
    """An environment in which every git process writes a trace to a file, and the file."""
    calls = tmp_path / "git-trace"
    return {**os.environ, "GIT_TRACE": str(calls)}, calls


def test_a_directory_without_git_renders_without_a_git_process(tmp_path: Path):
    # The installed template and a checkout's snapshot are such directories.
    env, calls = git_logged(tmp_path)
    source = a_template(tmp_path / "template")
    done = subprocess.run(
        [
            *(sys.executable, "-m", "workergen", "new", str(tmp_path / "out")),
            *("--defaults", "--template", str(source)),
        ],
        env=env,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "out" / "a.txt").read_text() == "x\n"
    assert not calls.exists(), calls.read_text()


def template_vcs(path: Path, env: dict[str, str]) -> str:
    """What copier, as `new` runs it, takes the template directory `path` to be."""
    code = (
        "import sys; from pathlib import Path; from workergen.copier_run import fresh_render_class;"
        "worker = fresh_render_class()(src_path=sys.argv[1], dst_path=Path(sys.argv[2]));"
        "print(worker.template.vcs)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(path), str(path.parent / "unused")],
        env=env,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_a_repository_is_still_taken_for_one(tmp_path: Path):
    repo = a_template(tmp_path / "repo")
    git(repo, "init", "-q")
    commit_all(repo, "template")
    assert template_vcs(repo, dict(os.environ)) == "git"
    assert template_vcs(a_template(tmp_path / "plain"), dict(os.environ)) == "None"


def test_a_work_tree_named_by_the_environment_is_still_taken_for_one(tmp_path: Path):
    # No `.git` in the directory: GIT_DIR and GIT_WORK_TREE place the repository elsewhere.
    tree = a_template(tmp_path / "tree")
    store = tmp_path / "store.git"
    env = {**os.environ, "GIT_DIR": str(store), "GIT_WORK_TREE": str(tree)}
    subprocess.run(["git", "init", "-q"], env=env, check=True)
    assert not (tree / ".git").exists()
    assert template_vcs(tree, env) == "git"
