"""Template releases: the PEP 440 version tags of the template repository, and checkouts.

A release is a git tag such as `v0.2.0`; copier orders tags by PEP 440 and
skips pre-releases unless asked, and so does workergen. Reading them takes one
`git ls-remote`: no clone, no network beyond what git does.
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from workergen.errors import TemplateRepositoryError

if TYPE_CHECKING:
    from packaging.version import Version

# `git describe --tags` output for a commit after a tag: <tag>-<count>-g<hash>.
_DESCRIBE = re.compile(r"^(?P<tag>.+)-(?P<count>\d+)-g(?P<hash>[0-9a-f]+)$")


@dataclass(frozen=True)
class Release:
    """A tag of the template repository and the version it names."""

    tag: str
    version: Version


def version_of(ref: str) -> Version | None:
    """The PEP 440 version a recorded `_commit` names, as copier reads it; None if none.

    `v0.2.0` is 0.2.0; a describe such as `v0.2.0-3-gabc123` (three commits after
    the tag) is 0.2.0.post3+abc123, newer than the tag and older than the next one.
    """
    from packaging.version import InvalidVersion, Version

    match = _DESCRIBE.match(ref)
    try:
        if match:
            base = Version(match["tag"])
            return Version(f"{base.base_version}.post{match['count']}+{match['hash']}")
        return Version(ref)
    except InvalidVersion:
        return None


_ALIASES = {"gh:": "https://github.com/", "gl:": "https://gitlab.com/"}


def git_address(src_path: str) -> str:
    """The address git understands for a recorded `_src_path`, expanded as copier does.

    `gh:org/repo` and `gl:org/repo` become https addresses, `git+` prefixes go.
    """
    for alias, base in _ALIASES.items():
        if src_path.startswith(alias):
            rest = src_path.removeprefix(alias).lstrip("/")
            return base + (rest if rest.endswith(".git") else f"{rest}.git")
    return src_path.removeprefix("git+")


def releases(src_path: str, *, prereleases: bool = False) -> list[Release]:
    """The template's releases, newest first."""
    address = git_address(src_path)
    try:
        output = subprocess.run(
            ["git", "ls-remote", "--tags", "--refs", "--", address],
            capture_output=True,
            text=True,
            check=True,
            timeout=120,
        ).stdout
    except subprocess.CalledProcessError as error:
        reason = error.stderr.strip().splitlines()[-1] if error.stderr.strip() else str(error)
        raise TemplateRepositoryError(src_path=src_path, reason=reason) from None
    except (OSError, subprocess.TimeoutExpired) as error:
        raise TemplateRepositoryError(src_path=src_path, reason=str(error)) from None
    found = []
    for line in output.splitlines():
        _, _, ref = line.partition("\t")
        tag = ref.removeprefix("refs/tags/")
        version = version_of(tag) if not _DESCRIBE.match(tag) else None
        if version is None or (version.is_prerelease and not prereleases):
            continue
        found.append(Release(tag=tag, version=version))
    return sorted(found, key=lambda release: release.version, reverse=True)


def latest_release(src_path: str, *, prereleases: bool = False) -> Release | None:
    """The newest release of the template, or None when it has no version tags."""
    found = releases(src_path, prereleases=prereleases)
    return found[0] if found else None


def checkout(src_path: str, ref: str, destination: Path) -> None:
    """Clone the template repository into `destination` at `ref` (a tag, branch or commit)."""
    address = git_address(src_path)
    for command in (
        ["git", "clone", "--quiet", "--no-checkout", "--", address, str(destination)],
        ["git", "-C", str(destination), "checkout", "--quiet", ref, "--"],
    ):
        done = subprocess.run(command, capture_output=True, text=True)
        if done.returncode:
            reason = done.stderr.strip().splitlines()[-1] if done.stderr.strip() else "git failed"
            raise TemplateRepositoryError(src_path=src_path, reason=reason)
