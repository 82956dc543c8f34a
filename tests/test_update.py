"""Template versions: provenance, `workergen update`, `check`, `diff`, and plain `copier update`.

A project is made by `workergen new` from the installed (checked-out)
template. Newer releases are made in a `git clone` of this repository with
its tags deleted, by scripts/release.sh, and read from it with
`--template CLONE`; nothing here has or needs a git tag. tests/test_install.py
tells the same story through real installs (editable and wheel).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from support.releases import (
    APP_FILE,
    APP_FIX,
    BIN,
    README_FIX,
    REPO_ROOT,
    TEMPLATE_FIXES,
    clone_repository,
    commit_all,
    fix_app,
    fix_readme,
    git,
    git_env,
    git_identity,  # noqa: F401 (autouse: a git that can commit)
    holds_the_template_of,
    make_release,
    project_tests_pass,
    runtime_range,
)
from workergen import exit_codes
from workergen.cli import app
from workergen.provenance import DEFAULT_TEMPLATE_URL
from workergen.releases import parse_releases

LATEST = parse_releases((REPO_ROOT / "RELEASES").read_text())[0].version
V2 = f"{LATEST.major}.{LATEST.minor + 1}.0"
V3 = f"{LATEST.major}.{LATEST.minor + 2}.0"
runner = CliRunner()


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


def new_project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *, src: str | None = None) -> Path:
    """`workergen new` from the installed template; committed."""
    if src is None:
        monkeypatch.delenv("WORKERGEN_TEMPLATE_URL", raising=False)
    else:
        monkeypatch.setenv("WORKERGEN_TEMPLATE_URL", src)
    project = tmp_path / "billing"
    result = run(tmp_path, "new", str(project), "--defaults", *NON_DEFAULT_ANSWERS)
    assert result.exit_code == 0, result.output
    git(project, "init", "-q")
    commit_all(project, "Generated project")
    return project


def new_from(template: Path, project: Path, *ref: str):
    """`workergen new --template TEMPLATE [--vcs-ref REF]`."""
    vcs_ref = ("--vcs-ref", *ref) if ref else ()
    return run(
        project.parent, "new", str(project), "--defaults", "--template", str(template), *vcs_ref
    )


@pytest.fixture
def clone(tmp_path: Path) -> Path:
    """This repository as a user clones it: its committed HEAD, no tags."""
    return clone_repository(tmp_path / "workergen")


def copier_update(project: Path) -> subprocess.CompletedProcess[str]:
    """Plain `copier update`, as docs/updating.md gives it."""
    return subprocess.run(
        [str(BIN / "copier"), "update", "--defaults", "--skip-answered", "--conflict", "inline"],
        cwd=project,
        capture_output=True,
        text=True,
    )


def pre_commit(project: Path, hook: str) -> subprocess.CompletedProcess[str]:
    """Run one of the project's pre-commit hooks on every file (local hooks: no download)."""
    return subprocess.run(
        [str(BIN / "pre-commit"), "run", hook, "--all-files"],
        cwd=project,
        capture_output=True,
        text=True,
        env={**os.environ, "PRE_COMMIT_HOME": str(project.parent / "pre-commit-cache")},
    )


# --- provenance ----------------------------------------------------------------


def test_new_records_the_public_address_and_a_commit_every_clone_holds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, clone: Path
):
    monkeypatch.delenv("WORKERGEN_TEMPLATE_URL", raising=False)
    result = run(tmp_path, "new", str(tmp_path / "billing"), "--defaults")

    assert result.exit_code == 0, result.output
    answers = answers_of(tmp_path / "billing")
    assert answers["_src_path"] == DEFAULT_TEMPLATE_URL
    assert answers["_commit"].startswith(f"v{LATEST}-"), answers["_commit"]
    # A `git describe --long` name: git resolves it in a clone without tags.
    assert holds_the_template_of(clone, answers["_commit"])
    # Nothing that only exists on this machine.
    assert str(REPO_ROOT) not in (tmp_path / "billing" / ".copier-answers.yml").read_text()


def test_new_from_another_template_version(tmp_path: Path, clone: Path):
    make_release(clone, V2, *TEMPLATE_FIXES)
    project = tmp_path / "billing"

    result = new_from(clone, project, f"v{LATEST}")

    assert result.exit_code == 0, result.output
    assert answers_of(project)["_src_path"] == str(clone)
    assert answers_of(project)["_commit"].startswith(f"v{LATEST}-0-g")
    assert README_FIX not in (project / "README.md").read_text()

    latest = tmp_path / "latest"
    result = new_from(clone, latest)
    assert result.exit_code == 0, result.output
    assert answers_of(latest)["_commit"].startswith(f"v{V2}-0-g")
    assert README_FIX in (latest / "README.md").read_text()


# --- updating ----------------------------------------------------------------------


def test_a_conflicting_edit_is_listed_and_exits_non_zero(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, clone: Path
):
    project = new_project(tmp_path, monkeypatch)
    app_module = project / "billing" / "app.py"
    app_module.write_text(fix_app(app_module.read_text()).replace(APP_FIX, '"""Our app."""'))
    commit_all(project, "Our own docstring")
    make_release(clone, V2, *TEMPLATE_FIXES)

    result = run(project, "update", "--template", str(clone))

    assert result.exit_code == exit_codes.CONFLICTS, result.output
    assert "billing/app.py" in result.output
    assert "need a hand" in result.output
    text = app_module.read_text()
    assert "<<<<<<< before updating" in text and ">>>>>>> after updating" in text
    # What did merge cleanly arrived.
    assert README_FIX in (project / "README.md").read_text()

    # The generated pre-commit hooks refuse to commit the markers, and .rej files.
    (project / "README.md.rej").write_text("@@ -1 +1 @@\n")
    git(project, "add", "-A")
    hooks = pre_commit(project, "no-conflict-markers")
    assert hooks.returncode != 0, hooks.stdout
    assert "billing/app.py" in hooks.stdout
    hooks = pre_commit(project, "no-rejected-hunks")
    assert hooks.returncode != 0, hooks.stdout
    assert "README.md.rej" in hooks.stdout


def test_pretend_shows_the_update_and_changes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, clone: Path
):
    project = new_project(tmp_path, monkeypatch)
    before = answers_of(project)["_commit"]
    make_release(clone, V2, *TEMPLATE_FIXES)

    result = run(project, "update", "--pretend", "--template", str(clone))

    assert result.exit_code == 0, result.output
    assert f"updating to v{V2}-0-g" in result.output
    assert "+" + README_FIX.strip() in result.output
    assert git(project, "status", "--porcelain") == ""
    assert answers_of(project)["_commit"] == before


def test_update_to_a_chosen_version_then_check_names_the_newer_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, clone: Path
):
    project = new_project(tmp_path, monkeypatch)
    make_release(clone, V2, ("README.md.jinja", fix_readme))
    make_release(clone, V3, (APP_FILE, fix_app))

    result = run(project, "update", "--template", str(clone), "--vcs-ref", V2)

    assert result.exit_code == exit_codes.OK, result.output
    assert answers_of(project)["_commit"].startswith(f"v{V2}-0-g")
    assert README_FIX in (project / "README.md").read_text()
    assert not (project / "billing" / "app.py").read_text().startswith(APP_FIX)
    assert (answers_of(project)["lanes"], answers_of(project)["queue_namespace"]) == (
        "critical,default",
        "ventas",
    )
    commit_all(project, "Update to v2")
    result = run(project, "check", "--template", str(clone))
    assert result.exit_code == exit_codes.UPDATE_AVAILABLE, result.output
    assert f"latest:    v{V3}" in result.output


def test_an_update_never_removes_a_file_the_user_owns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, clone: Path
):
    project = new_project(tmp_path, monkeypatch)
    hello = project / "billing" / "jobs" / "hello.py"
    before = hello.read_text()
    git(
        clone,
        "rm",
        "-q",
        "template/{{package_name}}/jobs/hello.py.jinja",
        "template/tests/jobs/test_hello.py.jinja",
    )
    make_release(clone, V2, ("README.md.jinja", fix_readme))

    result = run(project, "update", "--template", str(clone))

    assert result.exit_code == exit_codes.OK, result.output
    assert hello.read_text() == before
    assert (project / "tests" / "jobs" / "test_hello.py").is_file()
    assert "kept billing/jobs/hello.py" in result.output
    assert README_FIX in (project / "README.md").read_text()


def test_a_template_file_you_edited_is_kept_when_the_new_version_drops_it(
    tmp_path: Path, clone: Path
):
    project = tmp_path / "billing"
    result = new_from(clone, project, "HEAD")
    assert result.exit_code == 0, result.output
    git(project, "init", "-q")
    commit_all(project, "Generated project")
    dockerignore = project / ".dockerignore"
    ours = dockerignore.read_text() + "secrets/\n"
    dockerignore.write_text(ours)
    commit_all(project, "Keep our secrets out of the image")
    git(clone, "rm", "-q", "template/.dockerignore", "template/deploy/grafana/dashboard.json.jinja")
    commit_all(clone, "Template: no .dockerignore, no dashboard")
    make_release(clone, V2)

    result = run(project, "update", "--template", str(clone))

    # Copier would delete both; the edited one stays, and needs a look.
    assert result.exit_code == exit_codes.CONFLICTS, result.output
    assert dockerignore.read_text() == ours
    assert ".dockerignore: you edited it and the new template version no longer ships it" in (
        result.output
    )
    assert not (project / "deploy" / "grafana").exists()
    assert "removed  deploy/grafana/ (1 file)" in result.output


def test_a_project_recording_a_release_by_its_tag_is_found_without_the_tag(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, clone: Path
):
    """Projects made by workergen 0.1.0 record `_commit: v0.1.0`, a tag no clone has."""
    first = parse_releases((REPO_ROOT / "RELEASES").read_text())[-1]
    project = tmp_path / "billing"
    result = new_from(clone, project, first.tag)
    assert result.exit_code == 0, result.output
    answers = (project / ".copier-answers.yml").read_text()
    (project / ".copier-answers.yml").write_text(
        "\n".join(
            f"_commit: {first.tag}" if line.startswith("_commit:") else line
            for line in answers.splitlines()
        )
        + "\n"
    )
    git(project, "init", "-q")
    commit_all(project, "Generated by 0.1.0")

    result = run(project, "check", "--template", str(clone))
    assert f"current:   {first.tag}-0-g{first.commit[:12]}" in result.output, result.output
    result = run(project, "diff", "--template", str(clone))
    assert result.exit_code == 0, result.output
    assert "No differences" in result.output


def test_plain_copier_update_works_where_the_recorded_source_is_reachable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, clone: Path
):
    project = new_project(tmp_path, monkeypatch, src=str(clone))
    # Another machine: the project moves; nothing in it points at this checkout.
    moved = tmp_path / "elsewhere" / "billing"
    moved.parent.mkdir()
    shutil.move(project, moved)
    make_release(clone, V2, *TEMPLATE_FIXES)

    done = copier_update(moved)

    assert done.returncode == 0, done.stderr
    assert README_FIX in (moved / "README.md").read_text()
    assert (moved / "billing" / "app.py").read_text().startswith(APP_FIX)
    assert answers_of(moved)["lanes"] == "critical,default"
    assert answers_of(moved)["_src_path"] == str(clone)
    # copier records the commit it updated to; workergen reads it as the release.
    commit_all(moved, "copier update")
    result = run(moved, "check", "--template", str(clone))
    assert result.exit_code == exit_codes.OK, result.output
    project_tests_pass(moved)


# --- projects made before the runtime library ------------------------------------

# The template just before the runtime became the workergen-runtime package; like
# release 0.1.0, it renders the runtime into the project as billing/core/.
BEFORE_THE_LIBRARY = "e929c91"
FIRST_RELEASE = parse_releases((REPO_ROOT / "RELEASES").read_text())[-1].tag
OLD_TEMPLATES = pytest.mark.parametrize(
    "ref", [FIRST_RELEASE, BEFORE_THE_LIBRARY], ids=["release-0.1.0", "before-the-library"]
)
# A job written by hand, as in release 0.1.0 (it has no make:job): a relative
# import of core, and a test importing a core module.
HAND_WRITTEN_JOB = {
    "billing/jobs/send_invoice.py": '''"""Send an invoice."""

from ..core import job


@job(name="billing.send_invoice", queue="default")
class SendInvoiceJob:
    """Send one invoice."""

    def handle(self, number: int) -> str:
        return f"sent {number}"
''',
    "tests/jobs/test_send_invoice.py": """from billing.core.settings import get_settings
from billing.jobs.send_invoice import SendInvoiceJob


def test_it_sends_the_invoice() -> None:
    assert SendInvoiceJob(7) == "sent 7"
    assert get_settings().queue_namespace
""",
}
# A cron from make:cron, where the project has it: it imports core's schedules module,
# which the runtime keeps in its scheduling subpackage.
CRON = ("billing/crons/nightly.py", "tests/crons/test_nightly.py")
# Where the runtime's modules are now: what the user's files must import after the update.
RUNTIME_NAMES = (
    ("from ..core import", "from workergen_runtime import"),
    ("billing.core.schedules", "workergen_runtime.scheduling.schedules"),
    ("billing.core", "workergen_runtime"),
)


def old_project(tmp_path: Path, clone: Path, ref: str) -> tuple[Path, dict[str, str]]:
    """A project of template `ref`, with billing/core/, and the user's work, committed.

    The user's work: a job and its test (from `python -m billing make:job` where the
    project has it, with a cron from make:cron), an edited README and a .env. Returns
    the project and the user's files (relative path -> text).
    """
    project = tmp_path / "billing"
    result = new_from(clone, project, ref)
    assert result.exit_code == 0, result.output
    assert (project / "billing" / "core" / "jobs.py").is_file()
    git(project, "init", "-q")
    commit_all(project, "Generated project")
    made = (project / "billing" / "core" / "make_cli.py").is_file()
    if made:
        for command in (
            ["make:job", "SendInvoice"],
            ["make:cron", "Nightly", "--schedule", "0 2 * * *"],
        ):
            done = subprocess.run(
                [sys.executable, "-m", "billing", *command],
                cwd=project,
                capture_output=True,
                text=True,
            )
            assert done.returncode == 0, done.stdout + done.stderr
    else:
        for relative, text in HAND_WRITTEN_JOB.items():
            (project / relative).write_text(text)
    readme = project / "README.md"
    readme.write_text(readme.read_text() + "\n## Our notes\n\nInvoices go out at night.\n")
    (project / ".env").write_text("QUEUE_NAMESPACE=ventas\n")
    commit_all(project, "Our work")
    ours = ["billing/jobs/hello.py", *HAND_WRITTEN_JOB, *(CRON if made else ()), ".env"]
    return project, {relative: (project / relative).read_text() for relative in ours}


def assert_on_the_runtime(project: Path, ours: dict[str, str], version: str) -> None:
    """billing/core/ is gone, the runtime is a dependency, and the user's work is there."""
    assert not (project / "billing" / "core").exists()
    pyproject = (project / "pyproject.toml").read_text()
    assert f'"workergen-runtime{runtime_range(version)}"' in pyproject
    assert "billing.core" not in pyproject
    for relative, text in ours.items():
        for old, new in RUNTIME_NAMES:
            text = text.replace(old, new)
        assert (project / relative).read_text() == text, relative
    readme = (project / "README.md").read_text()
    assert "## Our notes" in readme and "billing/core/" not in readme


def edit_core_retry(project: Path) -> str:
    """Edit billing/core/retry.py (not committed); return its new text."""
    retry = project / "billing" / "core" / "retry.py"
    edited = retry.read_text() + "\n# Ours: invoices retry for a day.\n"
    retry.write_text(edited)
    return edited


@OLD_TEMPLATES
def test_an_old_project_updates_to_the_runtime_library(tmp_path: Path, clone: Path, ref: str):
    project, ours = old_project(tmp_path, clone, ref)
    make_release(clone, V2)

    result = run(project, "update", "--template", str(clone))

    assert result.exit_code == exit_codes.OK, result.output
    assert "removed  billing/core/ (" in result.output
    rewritten = "imports  billing/jobs/send_invoice.py: billing.core -> workergen_runtime"
    assert rewritten in result.output
    # The new dependency, from this checkout's runtime/ (the suite runs workergen from it).
    assert f"pip install -e {REPO_ROOT / 'runtime'} -e '.[dev]'" in result.output
    assert_on_the_runtime(project, ours, V2)
    assert answers_of(project)["_commit"].startswith(f"v{V2}-0-g")
    assert git(project, "status", "--porcelain", "--ignored", ".env") == "!! .env\n"
    project_tests_pass(project)


def test_an_edited_core_file_is_kept_out_of_the_way_and_reported(tmp_path: Path, clone: Path):
    project, ours = old_project(tmp_path, clone, BEFORE_THE_LIBRARY)
    edited = edit_core_retry(project)
    (project / "billing" / "core" / "billing_rules.py").write_text("GRACE_DAYS = 3\n")
    commit_all(project, "Our retry note and rules, in core")
    make_release(clone, V2)

    pretend = run(project, "update", "--pretend", "--template", str(clone))
    assert pretend.exit_code == exit_codes.CONFLICTS, pretend.output
    assert "billing/core_local/retry.py: your edit of billing/core/retry.py" in pretend.output
    assert git(project, "status", "--porcelain") == ""

    result = run(project, "update", "--template", str(clone))

    # Kept, not lost: the edit no longer takes effect, so the update says so and exits 11.
    assert result.exit_code == exit_codes.CONFLICTS, result.output
    assert "2 file(s) need a hand" in result.output
    assert (
        "billing/core_local/retry.py: your edit of billing/core/retry.py, kept here: "
        "the workergen-runtime package replaces core/, so it no longer takes effect"
    ) in result.output
    assert "billing/core_local/billing_rules.py: your own billing/core/billing_rules.py" in (
        result.output
    )
    assert (project / "billing" / "core_local" / "retry.py").read_text() == edited
    assert (project / "billing" / "core_local" / "billing_rules.py").read_text() == (
        "GRACE_DAYS = 3\n"
    )
    assert_on_the_runtime(project, ours, V2)
    # The core files the user left alone are gone, not kept.
    assert sorted(path.name for path in (project / "billing" / "core_local").iterdir()) == [
        "billing_rules.py",
        "retry.py",
    ]
    project_tests_pass(project)


def documented_import_fix() -> str:
    """The command docs/updating.md gives for imports after a plain `copier update`."""
    text = (REPO_ROOT / "docs" / "updating.md").read_text()
    block = text.split("<!-- imports after a plain copier update -->\n```bash\n", 1)[1]
    return block.split("```", 1)[0]


@OLD_TEMPLATES
def test_plain_copier_update_removes_core_and_the_documented_command_fixes_the_imports(
    tmp_path: Path, clone: Path, ref: str
):
    project, ours = old_project(tmp_path, clone, ref)
    edited = edit_core_retry(project)
    commit_all(project, "Our retry note, in core")
    make_release(clone, V2)

    done = copier_update(project)

    assert done.returncode == 0, done.stderr
    # Copier deletes every file the new version no longer ships, edited or not
    # (docs/updating.md says so): the edit is in the last commit, nowhere else.
    assert not (project / "billing" / "core").exists()
    assert git(project, "show", "HEAD:billing/core/retry.py") == edited
    fix = subprocess.run(
        ["bash", "-c", documented_import_fix()],
        cwd=project,
        capture_output=True,
        text=True,
        env=git_env(),
    )
    assert fix.returncode == 0, fix.stdout + fix.stderr
    assert_on_the_runtime(project, ours, V2)
    commit_all(project, "copier update")
    # Copier records the release's commit as it names it; workergen reads it as the release.
    result = run(project, "check", "--template", str(clone))
    assert result.exit_code == exit_codes.OK, result.output
    project_tests_pass(project)


# --- refusals: one or two lines, a hint, exit 1, nothing changed -----------------


def assert_refused(result, *needles: str) -> None:
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert lines[0].startswith("Error: "), result.output
    assert len(lines) <= 2, result.output  # what went wrong, and what to do
    for needle in needles:
        assert needle in result.output, result.output


def test_update_refuses_a_dirty_tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    project = new_project(tmp_path, monkeypatch)
    (project / "billing" / "jobs" / "draft.py").write_text("# not committed\n")

    result = run(project, "update")

    assert_refused(result, "uncommitted changes", "billing/jobs/draft.py", "Commit or stash")


def test_update_refuses_a_project_git_does_not_track(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    project = new_project(tmp_path, monkeypatch)
    shutil.rmtree(project / ".git")

    result = run(project, "update")

    assert_refused(result, "not tracked by git", "git init")


@pytest.mark.parametrize("command", ["update", "check", "diff"])
def test_commands_refuse_to_run_outside_a_project(tmp_path: Path, command: str):
    result = run(tmp_path, command)
    assert_refused(result, "not inside a project generated by workergen", "Run this command")


@pytest.mark.parametrize("command", ["update", "check", "diff"])
def test_a_version_the_history_does_not_hold_is_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, command: str
):
    project = new_project(tmp_path, monkeypatch)
    answers = (project / ".copier-answers.yml").read_text()
    recorded = answers_of(project)["_commit"]
    (project / ".copier-answers.yml").write_text(
        answers.replace(recorded, "v9.9.0-0-g0123456789ab")
    )
    commit_all(project, "A version from elsewhere")

    result = run(project, command)

    assert_refused(result, "'v9.9.0-0-g0123456789ab' is not in", "Install the workergen")


@pytest.mark.parametrize("command", ["update", "check", "diff"])
def test_an_unreachable_template_is_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, command: str
):
    project = new_project(tmp_path, monkeypatch)

    result = run(project, command, "--template", str(tmp_path / "no-such-repository"))

    assert_refused(result, "cannot read the template history", "--template")


def test_update_to_a_version_the_history_does_not_hold_is_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    project = new_project(tmp_path, monkeypatch)

    result = run(project, "update", "--vcs-ref", "v9.9.0")

    assert_refused(result, "'v9.9.0' is not in", "Pass a release it lists")
    assert git(project, "status", "--porcelain") == ""


def test_check_never_says_current_without_a_release_to_compare_with(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, clone: Path
):
    project = new_project(tmp_path, monkeypatch)
    git(clone, "rm", "-q", "RELEASES")
    commit_all(clone, "No releases")

    result = run(project, "check", "--template", str(clone))

    assert_refused(result, "lists no template release")


def test_old_core_imports_become_the_runtime_modules_that_hold_them_now() -> None:
    from workergen.core_migration import rewrite_source

    old = (
        "from billing.core import job\n"
        "from billing.core.schedules import daily\n"
        "from billing.core.deadletter.redis import RedisDeadLetterStore\n"
        "from billing.core.flows import chain\n"
        "from billing.core.project import LANES\n"
        "from ..core.errors import ProjectError\n"
    )
    assert rewrite_source(old, "billing", home="billing.jobs") == (
        "from workergen_runtime import job\n"
        "from workergen_runtime.scheduling.schedules import daily\n"
        "from workergen_runtime.brokers.redis.deadletters import RedisDeadLetterStore\n"
        "from workergen_runtime.flows import chain\n"
        "from billing.project import LANES\n"
        "from workergen_runtime.errors import ProjectError\n"
    )


def test_every_module_of_the_old_core_has_a_home_in_the_runtime() -> None:
    import importlib.util

    from workergen.core_migration import TEMPLATE_CORE, rewrite_source

    listed = git(REPO_ROOT, "ls-tree", "-r", "--name-only", BEFORE_THE_LIBRARY, "--", TEMPLATE_CORE)
    modules = {"http_api", "http_cli"}  # rendered only with the HTTP front door
    for path in listed.splitlines():
        if path.endswith(".py"):
            dotted = path.removeprefix(f"{TEMPLATE_CORE}/").removesuffix(".py").replace("/", ".")
            modules.add(dotted.removesuffix("__init__").rstrip("."))
    assert {"schedules", "deadletter.redis", "worker"} <= modules
    for module in sorted(modules):
        old = f"billing.core.{module}" if module else "billing.core"
        new = rewrite_source(old, "billing")
        spec = importlib.util.find_spec(new)
        assert spec is not None, (old, new)
        # A module of the old core is a module of the runtime, not a subpackage's folder.
        was_a_package = module in ("", "deadletter")
        assert (spec.submodule_search_locations is not None) == was_a_package, (old, new)
