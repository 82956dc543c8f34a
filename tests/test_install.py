"""workergen as a user installs it: from a git clone of this repository (no tags), or wheels.

Each story makes a project, finds nothing to update, then makes a release
with the documented command (scripts/release.sh) and updates the project to
it: offline, with no git tag anywhere, and for the wheels with no checkout.
The wheels are workergen's and workergen-runtime's, built into one folder as
docs/releasing.md says; workergen is installed from that folder, and so is the
runtime the updated project depends on, in the project's own environment.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from packaging.version import Version

from support.releases import (
    APP_FIX,
    BIN,
    README_FIX,
    TEMPLATE_FIXES,
    build_dists,
    clone_repository,
    commit_all,
    dist_wheels,
    git,
    holds_the_template_of,
    installed_version,
    make_release,
    make_venv,
    pip_install,
    project_tests_pass,
    runtime_range,
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


def updates_to(
    venv: Path, project: Path, tag: str, ours: dict[Path, str], *, wheels: Path | None = None
) -> None:
    """`workergen update` brings release `tag` into the project, whose tests then pass.

    With `wheels`, the project is installed in an environment of its own, its runtime
    taken from that folder, and its tests run there; else they run in `venv`.
    """
    done = workergen(venv, project, "check")
    assert done.returncode == exit_codes.UPDATE_AVAILABLE, done.stdout + done.stderr
    assert f"latest:    {tag}" in done.stdout

    done = workergen(venv, project, "update")

    assert done.returncode == exit_codes.OK, done.stdout + done.stderr
    assert "changed  README.md" in done.stdout
    readme = (project / "README.md").read_text()
    assert README_FIX in readme and "## Our notes" in readme  # both sides of the merge
    assert (project / "billing" / "app.py").read_text().startswith(APP_FIX)
    assert {path: path.read_text() for path in ours} == ours  # the jobs stay as they were
    answers = answers_of(project)
    assert answers["_commit"].startswith(f"{tag}-0-g"), answers["_commit"]
    assert answers["_src_path"] == DEFAULT_TEMPLATE_URL
    assert answers["lanes"] == "critical,default"
    assert not list(project.rglob("*.rej"))
    # Projects of the release take any runtime of its minor release.
    pyproject = (project / "pyproject.toml").read_text()
    assert f'"workergen-runtime{runtime_range(tag[1:])}"' in pyproject
    if wheels is None:
        project_tests_pass(project, venv / "bin" / "python")
    else:
        own = make_venv(project.parent / f"{project.name}-venv")
        pip_install(own, "--find-links", str(wheels), "--editable", f"{project}[dev]", deps=True)
        version, where = installed_version(own, "workergen-runtime")
        assert (version, where.is_relative_to(own)) == (tag[1:], True)
        project_tests_pass(project, own / "bin" / "python")

    commit_all(project, "Update the template")
    done = workergen(venv, project, "check")
    assert done.returncode == exit_codes.OK, done.stdout + done.stderr


def test_an_editable_install_from_a_clone_updates_projects_offline(tmp_path: Path):
    clone = clone_repository(tmp_path / "workergen")
    venv = make_venv(tmp_path / "venv")
    pip_install(venv, "--editable", str(clone / "runtime"), "--editable", str(clone), deps=True)
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


def test_new_wheels_update_a_project_made_with_older_ones_offline(tmp_path: Path, wheel_venv: Path):
    clone = clone_repository(tmp_path / "workergen")
    dist = tmp_path / "dist-1"
    build_dists(clone, dist)
    pip_install(wheel_venv, "--find-links", str(dist), "workergen", deps=True)
    for distribution in ("workergen", "workergen-runtime"):
        _, where = installed_version(wheel_venv, distribution)
        assert where.is_relative_to(wheel_venv), (distribution, where)
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
    first = tmp_path / "first-sqs"
    assert (first / "deploy" / "kubernetes" / "http.yaml").is_file()
    assert (first / "first_sqs" / "project.py").is_file()
    assert not (first / "first_sqs" / "core").exists()  # the runtime is a dependency
    assert '"workergen-runtime[sqs,http]>=' in (first / "pyproject.toml").read_text()
    assert not list(cache.rglob("*.cache"))
    project = new_project(wheel_venv, tmp_path)
    nothing_to_update(wheel_venv, project, latest_tag(clone))
    ours = user_work(wheel_venv, project)

    tag = f"v{next_version(clone)}"
    # The release builds both distributions into the clone's dist/, as a maintainer's does.
    make_release(clone, tag[1:], *TEMPLATE_FIXES, build=True)
    dist = tmp_path / "dist-2"
    shutil.move(clone / "dist", dist)
    wheels = dist_wheels(dist)
    assert [Version(wheel.name.split("-")[1]) for wheel in wheels] == [Version(tag[1:])] * 2
    assert sorted(path.name for path in dist.glob("*.tar.gz")) == [
        f"workergen-{tag[1:]}.tar.gz",
        f"workergen_runtime-{tag[1:]}.tar.gz",
    ]
    shutil.rmtree(clone)  # no checkout to fall back on: the wheels carry what they need
    pip_install(wheel_venv, "--find-links", str(dist), "--upgrade", "workergen", deps=True)
    # workergen pins the runtime of its own release, found in the same folder.
    assert installed_version(wheel_venv, "workergen-runtime")[0] == tag[1:]

    updates_to(wheel_venv, project, tag, ours, wheels=dist)


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
    assert (project / "shop_front" / "project.py").is_file()
    assert not (project / "shop_front" / "core").exists()  # the runtime is a dependency
    project_tests_pass(project)
