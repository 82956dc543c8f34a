"""Pieces of updating: release versions and names, template addresses, leftover conflicts."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from packaging.version import Version

from support.releases import (
    REPO_ROOT,
    clone_repository,
    commit_all,
    git,
    git_env,
    holds_the_template_of,
    make_release,
    release_versions,
    runtime_range,
)
from workergen.errors import TemplateRepositoryError
from workergen.generated_project import unresolved_files
from workergen.releases import git_address, parse_releases, read_history, version_of


@pytest.mark.parametrize(
    ("ref", "version"),
    [
        ("v0.1.0", Version("0.1.0")),
        ("0.1.0", Version("0.1.0")),
        ("v1.0.0rc1", Version("1.0.0rc1")),
        ("v0.1.0-3-gabc1234", Version("0.1.0.post3+abc1234")),
        ("v0.2.0-0-gabc1234", Version("0.2.0")),
        ("abc1234", None),
        ("main", None),
    ],
)
def test_version_of_a_recorded_commit(ref: str, version: Version | None):
    assert version_of(ref) == version


def test_a_describe_sorts_between_its_tag_and_the_next():
    after = version_of("v0.1.0-3-gabc1234")
    assert after is not None
    assert Version("0.1.0") < after < Version("0.1.1")


@pytest.mark.parametrize(
    ("src_path", "address"),
    [
        ("gh:workergen/workergen", "https://github.com/workergen/workergen.git"),
        ("gh:/workergen/workergen.git", "https://github.com/workergen/workergen.git"),
        ("gl:team/tpl", "https://gitlab.com/team/tpl.git"),
        ("git+https://example.com/tpl", "https://example.com/tpl"),
        (
            "https://github.com/workergen/workergen.git",
            "https://github.com/workergen/workergen.git",
        ),
        ("/srv/templates/workergen", "/srv/templates/workergen"),
    ],
)
def test_git_address_expands_as_copier_does(src_path: str, address: str):
    assert git_address(src_path) == address


def test_releases_file_lists_versions_and_commits_newest_first():
    releases = parse_releases("# comment\n0.1.0 aaaa\n\n0.10.0 cccc  # why\n0.2.0 bbbb\n")
    assert [(r.tag, r.commit) for r in releases] == [
        ("v0.10.0", "cccc"),
        ("v0.2.0", "bbbb"),
        ("v0.1.0", "aaaa"),
    ]


def test_a_malformed_releases_line_is_an_error_naming_it():
    with pytest.raises(TemplateRepositoryError, match="line 2"):
        parse_releases("0.1.0 aaaa\n0.2.0\n")


def test_a_commit_is_named_after_the_release_it_descends_from(tmp_path: Path):
    repo = tmp_path / "tpl"
    (repo / "template").mkdir(parents=True)
    git(tmp_path, "init", "-q", str(repo))
    (repo / "copier.yml").write_text("_subdirectory: template\n")
    (repo / "template" / "a.txt").write_text("one\n")
    commit_all(repo, "one")
    released = git(repo, "rev-parse", "HEAD").strip()
    (repo / "RELEASES").write_text(f"0.1.0 {released}\n")
    commit_all(repo, "Release 0.1.0")  # no template change: still the release
    history = read_history(repo, source="tpl")
    named = history.describe(history.head)
    assert (named.name, named.commit) == (f"v0.1.0-0-g{released[:12]}", released)
    assert named.version == Version("0.1.0")

    (repo / "template" / "a.txt").write_text("two\n")
    commit_all(repo, "two")
    head = git(repo, "rev-parse", "HEAD").strip()
    named = read_history(repo, source="tpl").describe(head)
    assert named.name == f"v0.1.0-2-g{head[:12]}"
    assert Version("0.1.0") < named.version < Version("0.1.1")
    # git resolves the name in the repository, which has no tag.
    assert git(repo, "rev-parse", f"{named.name}^{{commit}}").strip() == head


def test_unresolved_files_finds_markers_and_rejects_even_ignored(tmp_path: Path):
    def git(*args: str) -> None:
        subprocess.run(["git", "-C", str(tmp_path), *args], check=True, capture_output=True)

    git("init", "-q")
    (tmp_path / ".gitignore").write_text("*.log\nbuild/\n")
    (tmp_path / "clean.py").write_text("x = 1\n")
    (tmp_path / "merged.py").write_text("x = 1\n")
    git("add", "-A")
    git("-c", "user.name=T", "-c", "user.email=t@e", "commit", "-q", "-m", "start")

    (tmp_path / "merged.py").write_text(
        "<<<<<<< before updating\nx = 2\n=======\nx = 3\n>>>>>>> after updating\n"
    )
    (tmp_path / "clean.py").write_text("x = 1  # <<<<<<< in a comment is fine\n")
    (tmp_path / "pyproject.toml.rej").write_text("@@ -1 +1 @@\n")
    (tmp_path / "build").mkdir()
    (tmp_path / "build" / "setup.cfg.rej").write_text("@@ -1 +1 @@\n")

    assert unresolved_files(tmp_path) == [
        "build/setup.cfg.rej",
        "merged.py",
        "pyproject.toml.rej",
    ]


def test_a_template_released_with_tags_only_is_read_too(tmp_path: Path):
    repo = tmp_path / "tpl"
    git(tmp_path, "init", "-q", str(repo))
    (repo / "copier.yml").write_text("{}\n")
    commit_all(repo, "one")
    git(repo, "tag", "v1.2.0")
    git(repo, "tag", "not-a-version")

    history = read_history(repo, source="tpl")

    head = git(repo, "rev-parse", "HEAD").strip()
    assert [(r.tag, r.commit) for r in history.releases] == [("v1.2.0", head)]
    assert history.version("1.2.0").name == f"v1.2.0-0-g{head[:12]}"


def test_the_packages_the_pin_and_the_projects_runtime_range_agree_at_head():
    """scripts/release.sh sets all four together; nothing else may let them drift."""
    versions = release_versions(REPO_ROOT)
    version = versions["generator"]
    assert versions == {
        "generator": version,
        "runtime": version,
        "pin": version,
        "range": runtime_range(version),
    }


def test_a_release_sets_every_version_together_and_records_the_template_it_ships(
    tmp_path: Path,
):
    clone = clone_repository(tmp_path / "workergen")

    make_release(clone, "1.0.0rc1")  # checks the four places

    release = parse_releases((clone / "RELEASES").read_text())[0]
    assert str(release.version) == "1.0.0rc1"
    # A pre-release is named in full: a range of final releases would leave it out.
    template = git(clone, "show", f"{release.commit}:template/pyproject.toml.jinja")
    assert '>=1.0.0rc1,<1.1",' in template
    # RELEASES records the commit that set the range; the one recording it changes no
    # template file, so a wheel built at either ships the released template.
    assert release.commit != git(clone, "rev-parse", "HEAD").strip()
    assert holds_the_template_of(clone, release.commit)


def test_a_release_that_cannot_build_refuses_before_it_commits(tmp_path: Path):
    clone = clone_repository(tmp_path / "workergen")
    head = git(clone, "rev-parse", "HEAD")
    bare = tmp_path / "bare"  # a Python without the `build` module
    subprocess.run(["python3", "-m", "venv", "--without-pip", str(bare)], check=True)

    done = subprocess.run(
        ["bash", "scripts/release.sh", "9.9.9"],
        cwd=clone,
        capture_output=True,
        text=True,
        env={**git_env(), "PYTHON": str(bare / "bin" / "python")},
    )

    assert done.returncode != 0
    assert "has no 'build' module" in done.stderr
    assert "pip install build" in done.stderr
    assert "Or release with --no-build." in done.stderr
    assert git(clone, "rev-parse", "HEAD") == head
    assert git(clone, "status", "--porcelain") == ""
