"""Pure pieces of updating: release versions, template addresses, leftover conflicts."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from packaging.version import Version

from workergen.generated_project import unresolved_files
from workergen.provenance import release_tag
from workergen.releases import git_address, version_of


@pytest.mark.parametrize(
    ("ref", "version"),
    [
        ("v0.1.0", Version("0.1.0")),
        ("0.1.0", Version("0.1.0")),
        ("v1.0.0rc1", Version("1.0.0rc1")),
        ("v0.1.0-3-gabc1234", Version("0.1.0.post3+abc1234")),
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


def test_release_tags_are_v_and_the_version():
    assert release_tag("0.1.0") == "v0.1.0"


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
