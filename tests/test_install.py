"""workergen as a user installs it: from a git clone of this repository (no tags), or a wheel.

Each story makes a project, finds nothing to update, then makes a release
with the documented command (scripts/release.sh) and updates the project to
it: offline, with no git tag anywhere, and for the wheel with no checkout.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from packaging.version import Version

from support.releases import (
    BIN,
    CORE_FIX,
    README_FIX,
    TEMPLATE_FIXES,
    build_wheel,
    clone_repository,
    commit_all,
    git,
    holds_the_template_of,
    make_release,
    make_venv,
    pip_install,
    project_tests_pass,
    workergen,
)
from workergen import exit_codes
from workergen.provenance import DEFAULT_TEMPLATE_URL
from workergen.releases import parse_releases

pytestmark = pytest.mark.xdist_group("installs")


@pytest.fixture(scope="session")
def wheel_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One virtual environment for the wheels the tests build and install."""
    return make_venv(tmp_path_factory.mktemp("wheel-venv") / "venv")


def latest_tag(clone: Path) -> str:
    return parse_releases((clone / "RELEASES").read_text())[0].tag


def next_version(clone: Path) -> str:
    latest = parse_releases((clone / "RELEASES").read_text())[0].version
    return f"{latest.major}.{latest.minor + 1}.0"


def answers_of(project: Path) -> dict:
    return yaml.safe_load((project / ".copier-answers.yml").read_text())


def new_project(venv: Path, where: Path) -> Path:
    done = workergen(venv, where, "new", "billing", "--defaults", "--lanes", "critical,default")
    assert done.returncode == 0, done.stdout + done.stderr
    project = where / "billing"
    git(project, "init", "-q")
    commit_all(project, "Generated project")
    return project


def nothing_to_update(venv: Path, project: Path, latest: str) -> None:
    done = workergen(venv, project, "check")
    assert done.returncode == exit_codes.OK, done.stdout + done.stderr
    assert f"latest:    {latest}" in done.stdout
    assert "the latest release" in done.stdout

    done = workergen(venv, project, "update")
    assert done.returncode == exit_codes.OK, done.stdout + done.stderr
    assert "Already up to date" in done.stdout
    assert git(project, "status", "--porcelain") == ""

    done = workergen(venv, project, "diff")
    assert done.returncode == exit_codes.OK, done.stdout + done.stderr
    assert "No differences from template" in done.stdout
    assert "+++" not in done.stdout


def user_work(venv: Path, project: Path) -> dict[Path, str]:
    """Edit a user-owned file and a template-owned one, add a job with make:job; commit."""
    hello = project / "billing" / "jobs" / "hello.py"
    hello.write_text(hello.read_text().replace("Greet someone", "Greet a customer"))
    readme = project / "README.md"
    readme.write_text(readme.read_text() + "\n## Our notes\n\nInvoices go out at night.\n")
    done = workergen(venv, project, "make:job", "SendInvoice")
    assert done.returncode == 0, done.stdout + done.stderr
    commit_all(project, "Our work")
    made = [
        hello,
        project / "billing" / "jobs" / "send_invoice.py",
        project / "tests" / "jobs" / "test_send_invoice.py",
    ]
    return {path: path.read_text() for path in made}


def updates_to(venv: Path, project: Path, tag: str, ours: dict[Path, str]) -> None:
    done = workergen(venv, project, "check")
    assert done.returncode == exit_codes.UPDATE_AVAILABLE, done.stdout + done.stderr
    assert f"latest:    {tag}" in done.stdout

    done = workergen(venv, project, "update")

    assert done.returncode == exit_codes.OK, done.stdout + done.stderr
    assert "changed  README.md" in done.stdout
    readme = (project / "README.md").read_text()
    assert README_FIX in readme and "## Our notes" in readme  # both sides of the merge
    assert (project / "billing" / "core" / "errors.py").read_text().startswith(CORE_FIX)
    assert {path: path.read_text() for path in ours} == ours  # the jobs stay as they were
    answers = answers_of(project)
    assert answers["_commit"].startswith(f"{tag}-0-g"), answers["_commit"]
    assert answers["_src_path"] == DEFAULT_TEMPLATE_URL
    assert answers["lanes"] == "critical,default"
    assert not list(project.rglob("*.rej"))
    project_tests_pass(project)

    commit_all(project, "Update the template")
    done = workergen(venv, project, "check")
    assert done.returncode == exit_codes.OK, done.stdout + done.stderr


def test_an_editable_install_from_a_clone_updates_projects_offline(tmp_path: Path):
    clone = clone_repository(tmp_path / "workergen")
    venv = make_venv(tmp_path / "venv")
    pip_install(venv, "--editable", str(clone))
    project = new_project(venv, tmp_path)

    # The recorded version is a commit the clone holds, though it has no tags.
    recorded = answers_of(project)["_commit"]
    assert git(clone, "tag", "--list") == ""
    assert holds_the_template_of(clone, recorded)
    nothing_to_update(venv, project, latest_tag(clone))
    ours = user_work(venv, project)

    tag = f"v{next_version(clone)}"
    make_release(clone, tag[1:], *TEMPLATE_FIXES)

    updates_to(venv, project, tag, ours)


def test_a_new_wheel_updates_a_project_made_with_an_older_one_offline(
    tmp_path: Path, wheel_venv: Path
):
    clone = clone_repository(tmp_path / "workergen")
    pip_install(wheel_venv, "--force-reinstall", str(build_wheel(clone, tmp_path / "dist-1")))
    located = subprocess.run(
        [str(wheel_venv / "bin" / "python"), "-c", "import workergen; print(workergen.__file__)"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert Path(located).is_relative_to(wheel_venv)
    # The wheel ships its template compiled: a first run on a machine compiles none
    # of it, for any broker, and so writes nothing to its cache.
    cache = tmp_path / "first-run-cache"
    for broker in ("redis", "rabbitmq", "sqs"):
        done = workergen(
            wheel_venv,
            tmp_path,
            *("new", f"first-{broker}", "--defaults", "--broker", broker),
            *("--data", "http_api=true"),
            env={"XDG_CACHE_HOME": str(cache)},
        )
        assert done.returncode == 0, done.stderr
        # pip byte-compiled the template's Python files when it installed the wheel.
        assert not list((tmp_path / f"first-{broker}").rglob("*.pyc"))
        assert not list((tmp_path / f"first-{broker}").rglob("__pycache__"))
    assert (tmp_path / "first-sqs" / "first_sqs" / "core" / "http_api.py").is_file()
    assert not list(cache.rglob("*.cache"))
    project = new_project(wheel_venv, tmp_path)
    nothing_to_update(wheel_venv, project, latest_tag(clone))
    ours = user_work(wheel_venv, project)

    tag = f"v{next_version(clone)}"
    make_release(clone, tag[1:], *TEMPLATE_FIXES)
    wheel = build_wheel(clone, tmp_path / "dist-2")
    assert Version(wheel.name.split("-")[1]) == Version(tag[1:])
    shutil.rmtree(clone)  # no checkout to fall back on: the wheel carries what it needs
    pip_install(wheel_venv, "--force-reinstall", str(wheel))

    updates_to(wheel_venv, project, tag, ours)


def test_plain_copier_copy_of_a_clone_renders_a_working_project(tmp_path: Path):
    clone = clone_repository(tmp_path / "workergen")

    done = subprocess.run(
        [str(BIN / "copier"), "copy", "--defaults", "--trust", str(clone), "shop-front"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )

    assert done.returncode == 0, done.stderr
    project = tmp_path / "shop-front"
    answers = answers_of(project)
    assert answers["project_name"] == "shop-front"  # the folder's name
    assert answers["package_name"] == "shop_front"
    assert (project / "shop_front" / "core").is_dir()
    project_tests_pass(project)
