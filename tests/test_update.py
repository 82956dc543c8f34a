"""Template versions: provenance, `workergen update`, `check`, `diff`, and plain `copier update`.

Each test builds a throwaway template repository from this repository's
copier.yml and template/, tagged with the installed workergen's release tag
(what `workergen new` records), then releases a newer version into it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml
from packaging.version import Version
from typer.testing import CliRunner

from workergen import exit_codes
from workergen.cli import app
from workergen.provenance import DEFAULT_TEMPLATE_URL, installed_version, release_tag

REPO_ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
V1 = release_tag(installed_version())
_next = Version(installed_version())
V2 = release_tag(f"{_next.major}.{_next.minor + 1}.0")

README_FIX = "Requires Python 3.11 or newer.\n"
CORE_FIX = '"""Errors the project raises on purpose (every one carries a message for people)."""'
runner = CliRunner()


@pytest.fixture(autouse=True)
def git_identity(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A git that ignores this machine's configuration and can commit."""
    (tmp_path / "gitconfig").write_text(
        "[user]\n\tname = Test\n\temail = test@example.com\n[init]\n\tdefaultBranch = main\n"
    )
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(tmp_path / "gitconfig"))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    monkeypatch.setenv("PRE_COMMIT_HOME", str(tmp_path / "pre-commit-cache"))


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=cwd, check=True, capture_output=True, text=True
    ).stdout


def commit_all(cwd: Path, message: str) -> None:
    git(cwd, "add", "-A")
    git(cwd, "commit", "-q", "-m", message)


def make_template_repo(root: Path) -> Path:
    """This repository's template as a repository of its own, released as V1."""
    repo = root / "template-repo"
    repo.mkdir()
    shutil.copy(REPO_ROOT / "copier.yml", repo / "copier.yml")
    shutil.copytree(
        REPO_ROOT / "template", repo / "template", ignore=shutil.ignore_patterns("__pycache__")
    )
    (repo / "CHANGELOG.md").write_text(f"# Changelog\n\n## {V1[1:]}\n\n- First release.\n")
    git(repo, "init", "-q")
    commit_all(repo, "First release")
    git(repo, "tag", V1)
    return repo


def release(repo: Path, tag: str, *edits: tuple[str, Callable[[str], str]]) -> None:
    """Edit template files, record the release in the changelog, commit and tag it."""
    for relative, edit in edits:
        path = repo / "template" / relative
        path.write_text(edit(path.read_text()))
    changelog = repo / "CHANGELOG.md"
    changelog.write_text(
        changelog.read_text().replace("\n\n", f"\n\n## {tag[1:]}\n\n- Fixes.\n\n", 1)
    )
    commit_all(repo, f"Release {tag}")
    git(repo, "tag", tag)


def fix_readme(text: str) -> str:
    return text.replace("## Set up\n\n", f"## Set up\n\n{README_FIX}\n", 1)


def fix_core_errors(text: str) -> str:
    first, rest = text.split("\n", 1)
    assert first.startswith('"""'), first
    return f"{CORE_FIX}\n{rest}"


V2_EDITS = (
    ("README.md.jinja", fix_readme),
    ("{{package_name}}/core/errors.py", fix_core_errors),
    # A change to a file the user owns once it exists: it must not reach projects.
    ("{{package_name}}/jobs/hello.py.jinja", lambda text: text + "\n# new in the template\n"),
)


def run(cwd: Path, *args: str):
    old = Path.cwd()
    os.chdir(cwd)
    try:
        return runner.invoke(app, list(args))
    finally:
        os.chdir(old)


def answers_of(project: Path) -> dict:
    return yaml.safe_load((project / ".copier-answers.yml").read_text())


# Answers an update must keep (copier runs it with defaults for new questions only).
NON_DEFAULT_ANSWERS = ("--lanes", "critical,default", "--namespace", "ventas")


def new_project(tmp_path: Path, repo: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """`workergen new` from the shipped template, recording `repo`; committed."""
    monkeypatch.setenv("WORKERGEN_TEMPLATE_URL", str(repo))
    project = tmp_path / "billing"
    result = run(tmp_path, "new", str(project), "--defaults", *NON_DEFAULT_ANSWERS)
    assert result.exit_code == 0, result.output
    git(project, "init", "-q")
    commit_all(project, "Generated project")
    return project


def pre_commit(project: Path, hook: str) -> subprocess.CompletedProcess[str]:
    """Run one of the project's pre-commit hooks on every file (local hooks: no download)."""
    return subprocess.run(
        [str(BIN / "pre-commit"), "run", hook, "--all-files"],
        cwd=project,
        capture_output=True,
        text=True,
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


# --- provenance ----------------------------------------------------------------


def test_new_records_the_public_template_address_and_release(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.delenv("WORKERGEN_TEMPLATE_URL", raising=False)
    result = run(tmp_path, "new", str(tmp_path / "billing"), "--defaults")

    assert result.exit_code == 0, result.output
    answers = answers_of(tmp_path / "billing")
    assert answers["_src_path"] == DEFAULT_TEMPLATE_URL
    assert answers["_commit"] == V1
    assert answers["package_name"] == "billing"
    # Nothing that only exists on this machine.
    assert str(REPO_ROOT) not in (tmp_path / "billing" / ".copier-answers.yml").read_text()


def test_new_from_another_template_version(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    repo = make_template_repo(tmp_path)
    release(repo, V2, *V2_EDITS)
    project = tmp_path / "billing"

    result = run(
        tmp_path, "new", str(project), "--defaults", "--template", str(repo), "--vcs-ref", V1
    )

    assert result.exit_code == 0, result.output
    assert answers_of(project)["_src_path"] == str(repo)
    assert answers_of(project)["_commit"] == V1
    assert README_FIX not in (project / "README.md").read_text()

    latest = tmp_path / "latest"
    result = run(tmp_path, "new", str(latest), "--defaults", "--template", str(repo))
    assert result.exit_code == 0, result.output
    assert answers_of(latest)["_commit"] == V2
    assert README_FIX in (latest / "README.md").read_text()


# --- the whole story -------------------------------------------------------------


def test_update_brings_template_fixes_and_keeps_user_work(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    repo = make_template_repo(tmp_path)
    project = new_project(tmp_path, repo, monkeypatch)
    assert answers_of(project)["_src_path"] == str(repo)
    assert answers_of(project)["_commit"] == V1

    result = run(project, "check")
    assert result.exit_code == exit_codes.OK, result.output
    assert "on the latest template release" in result.output

    # The user's work: an edit to a file they own, a note in a template-owned
    # file, and a job of their own made by make:job.
    hello = project / "billing" / "jobs" / "hello.py"
    hello.write_text(hello.read_text().replace("Greet someone", "Greet a customer"))
    readme = project / "README.md"
    readme.write_text(readme.read_text() + "\n## Our notes\n\nInvoices go out at night.\n")
    result = run(project, "make:job", "SendInvoice")
    assert result.exit_code == 0, result.output
    job_file = project / "billing" / "jobs" / "send_invoice.py"
    job_test = project / "tests" / "jobs" / "test_send_invoice.py"
    made = {job_file: job_file.read_text(), job_test: job_test.read_text()}
    commit_all(project, "Our work")

    result = run(project, "diff")
    assert result.exit_code == 0, result.output
    assert "+## Our notes" in result.output
    headers = [line for line in result.output.splitlines() if line.startswith("+++ ")]
    assert headers == ["+++ project/README.md"], result.output
    result = run(project, "diff", "--all")
    assert "+++ project/billing/jobs/hello.py" in result.output

    release(repo, V2, *V2_EDITS)

    result = run(project, "check")
    assert result.exit_code == exit_codes.UPDATE_AVAILABLE, result.output
    assert V1 in result.output and V2 in result.output

    result = run(project, "update")

    assert result.exit_code == exit_codes.OK, result.output
    assert "README.md" in result.output
    text = readme.read_text()
    assert README_FIX in text and "## Our notes" in text  # both sides of the merge
    assert (project / "billing" / "core" / "errors.py").read_text().startswith(CORE_FIX)
    assert "Greet a customer" in hello.read_text()
    assert "new in the template" not in hello.read_text()
    assert {path: path.read_text() for path in made} == made
    answers = answers_of(project)
    assert answers["_commit"] == V2
    assert answers["_src_path"] == str(repo)
    assert (answers["lanes"], answers["queue_namespace"]) == ("critical,default", "ventas")
    assert not list(project.rglob("*.rej"))
    project_tests_pass(project)

    commit_all(project, "Update the template")
    result = run(project, "check")
    assert result.exit_code == exit_codes.OK, result.output
    result = run(project, "diff")
    headers = [line for line in result.output.splitlines() if line.startswith("+++ ")]
    assert headers == ["+++ project/README.md"], result.output


def test_a_conflicting_edit_is_listed_and_exits_non_zero(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    repo = make_template_repo(tmp_path)
    project = new_project(tmp_path, repo, monkeypatch)
    errors = project / "billing" / "core" / "errors.py"
    errors.write_text(fix_core_errors(errors.read_text()).replace(CORE_FIX, '"""Our errors."""'))
    commit_all(project, "Our own docstring")
    release(repo, V2, *V2_EDITS)

    result = run(project, "update")

    assert result.exit_code == exit_codes.CONFLICTS, result.output
    assert "billing/core/errors.py" in result.output
    assert "need a hand" in result.output
    text = errors.read_text()
    assert "<<<<<<< before updating" in text and ">>>>>>> after updating" in text
    # What did merge cleanly arrived.
    assert README_FIX in (project / "README.md").read_text()

    # The generated pre-commit hooks refuse to commit the markers, and .rej files.
    (project / "README.md.rej").write_text("@@ -1 +1 @@\n")
    git(project, "add", "-A")
    hooks = pre_commit(project, "no-conflict-markers")
    assert hooks.returncode != 0, hooks.stdout
    assert "billing/core/errors.py" in hooks.stdout
    hooks = pre_commit(project, "no-rejected-hunks")
    assert hooks.returncode != 0, hooks.stdout
    assert "README.md.rej" in hooks.stdout


def test_pretend_shows_the_update_and_changes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    repo = make_template_repo(tmp_path)
    project = new_project(tmp_path, repo, monkeypatch)
    release(repo, V2, *V2_EDITS)

    result = run(project, "update", "--pretend")

    assert result.exit_code == 0, result.output
    assert f"updating to {V2} would change" in result.output
    assert "+" + README_FIX.strip() in result.output
    assert git(project, "status", "--porcelain") == ""
    assert answers_of(project)["_commit"] == V1


def test_update_to_a_chosen_version(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    repo = make_template_repo(tmp_path)
    project = new_project(tmp_path, repo, monkeypatch)
    release(repo, V2, ("README.md.jinja", fix_readme))
    v3 = release_tag(f"{_next.major}.{_next.minor + 2}.0")
    release(repo, v3, ("{{package_name}}/core/errors.py", fix_core_errors))

    result = run(project, "update", "--vcs-ref", V2)

    assert result.exit_code == exit_codes.OK, result.output
    assert answers_of(project)["_commit"] == V2
    assert README_FIX in (project / "README.md").read_text()
    assert not (project / "billing" / "core" / "errors.py").read_text().startswith(CORE_FIX)
    commit_all(project, "Update to v2")
    result = run(project, "check")
    assert result.exit_code == exit_codes.UPDATE_AVAILABLE
    assert f"latest:    {v3}" in result.output


def test_an_update_never_removes_a_file_the_user_owns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    repo = make_template_repo(tmp_path)
    project = new_project(tmp_path, repo, monkeypatch)
    hello = project / "billing" / "jobs" / "hello.py"
    before = hello.read_text()
    git(
        repo,
        "rm",
        "-q",
        "template/{{package_name}}/jobs/hello.py.jinja",
        "template/tests/jobs/test_hello.py.jinja",
    )
    release(repo, V2, ("README.md.jinja", fix_readme))

    result = run(project, "update")

    assert result.exit_code == exit_codes.OK, result.output
    assert hello.read_text() == before
    assert (project / "tests" / "jobs" / "test_hello.py").is_file()
    assert "kept billing/jobs/hello.py" in result.output
    assert README_FIX in (project / "README.md").read_text()


def test_plain_copier_update_works_in_a_project_from_workergen_new(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    repo = make_template_repo(tmp_path)
    project = new_project(tmp_path, repo, monkeypatch)
    # Another machine: the project moves; nothing in it points at this checkout.
    moved = tmp_path / "elsewhere" / "billing"
    moved.parent.mkdir()
    shutil.move(project, moved)
    monkeypatch.delenv("WORKERGEN_TEMPLATE_URL")
    release(repo, V2, *V2_EDITS)

    done = subprocess.run(
        [str(BIN / "copier"), "update", "--defaults", "--skip-answered", "--conflict", "inline"],
        cwd=moved,
        capture_output=True,
        text=True,
    )

    assert done.returncode == 0, done.stderr
    assert README_FIX in (moved / "README.md").read_text()
    assert answers_of(moved)["_commit"] == V2
    assert answers_of(moved)["lanes"] == "critical,default"
    assert answers_of(moved)["_src_path"] == str(repo)


# --- refusals --------------------------------------------------------------------


def test_update_refuses_a_dirty_tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    repo = make_template_repo(tmp_path)
    project = new_project(tmp_path, repo, monkeypatch)
    release(repo, V2, *V2_EDITS)
    (project / "billing" / "jobs" / "draft.py").write_text("# not committed\n")

    result = run(project, "update")

    assert result.exit_code == 1, result.output
    assert "uncommitted changes" in result.output
    assert "billing/jobs/draft.py" in result.output
    assert "Commit or stash" in result.output
    assert answers_of(project)["_commit"] == V1


def test_update_refuses_a_project_git_does_not_track(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    repo = make_template_repo(tmp_path)
    project = new_project(tmp_path, repo, monkeypatch)
    shutil.rmtree(project / ".git")

    result = run(project, "update")

    assert result.exit_code == 1, result.output
    assert "not tracked by git" in result.output


@pytest.mark.parametrize("command", ["update", "check", "diff"])
def test_commands_refuse_to_run_outside_a_project(tmp_path: Path, command: str):
    result = run(tmp_path, command)
    assert result.exit_code == 1, result.output
    assert "not inside a project generated by workergen" in result.output
    assert "Traceback" not in result.output


def test_check_reports_an_unreadable_template_as_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    repo = make_template_repo(tmp_path)
    project = new_project(tmp_path, repo, monkeypatch)
    shutil.rmtree(repo)

    result = run(project, "check")

    assert result.exit_code == 1, result.output
    assert "cannot read the template repository" in result.output
