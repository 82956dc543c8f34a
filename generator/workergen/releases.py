"""Template releases and the template's history, read from git without tags or network.

A release is a line of the `RELEASES` file committed at the root of the
template repository: a PEP 440 version and the commit whose `copier.yml` and
`template/` it released. The file travels with every clone of the repository
(tags do not) and with the history bundled into the wheel.

A template version is named as `git describe --long` would name it after such
a release: `v0.2.0-0-g1a2b3c4d5e6f` is release 0.2.0 itself, and
`v0.2.0-3-g9f8e7d6c5b4a` a commit three commits later whose template differs.
git resolves either form to its commit in any clone, with or without tags,
so copier can check it out; and the name says the version to a person.
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from workergen.errors import TemplateRepositoryError, UnknownTemplateVersionError

if TYPE_CHECKING:
    from packaging.version import Version

RELEASES_FILE = "RELEASES"
TEMPLATE_PATHS = ("copier.yml", "template", "template_add")
"""What a template version is made of (template_add/: what `workergen add` writes); any other
file may change between releases."""

# `git describe --long` output: <tag>-<count>-g<hash>.
_DESCRIBE = re.compile(r"^(?P<tag>.+)-(?P<count>\d+)-g(?P<hash>[0-9a-f]{4,40})$")
_ABBREV = 12


@dataclass(frozen=True)
class Release:
    """A release of the template: its version and the commit it released."""

    version: Version
    commit: str

    @property
    def tag(self) -> str:
        """The release's name: `v` and the version (`v0.2.0`)."""
        return f"v{self.version}"


@dataclass(frozen=True)
class TemplateVersion:
    """A commit of the template, the name a project records for it, and its version."""

    name: str
    commit: str
    version: Version | None


def version_of(ref: str) -> Version | None:
    """The PEP 440 version a recorded `_commit` names; None if it names none.

    `v0.2.0` and `v0.2.0-0-gabc123` are 0.2.0; `v0.2.0-3-gabc123` (three commits
    after the release) is 0.2.0.post3+abc123: newer than 0.2.0, older than the next.
    """
    from packaging.version import InvalidVersion, Version

    match = _DESCRIBE.match(ref)
    try:
        if match:
            base = Version(match["tag"])
            if match["count"] == "0":
                return base
            return Version(f"{base.base_version}.post{match['count']}+{match['hash']}")
        return Version(ref)
    except InvalidVersion:
        return None


def parse_releases(text: str) -> list[Release]:
    """The releases a `RELEASES` file lists (`<version> <commit>` lines), newest first."""
    from packaging.version import InvalidVersion, Version

    found = []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        try:
            version_text, commit = line.split()
            found.append(Release(version=Version(version_text), commit=commit))
        except (ValueError, InvalidVersion):
            raise TemplateRepositoryError(
                source=RELEASES_FILE,
                reason=f"line {number} is not '<version> <commit>': {raw!r}",
            ) from None
    return sorted(found, key=lambda release: release.version, reverse=True)


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


def working_tree_files(repo: Path) -> list[str]:
    """The template's files (`TEMPLATE_PATHS`) in the working tree of `repo`, as copier sees them.

    Those git tracks or would track (ignored ones left out), uncommitted edits
    included and deleted files left out: what copier takes of the template when
    it clones a local checkout at HEAD and commits its draft changes.
    """
    listed = _git(
        repo, "ls-files", "-z", "--cached", "--others", "--exclude-standard", "--", *TEMPLATE_PATHS
    ).stdout
    names = dict.fromkeys(name for name in listed.split("\0") if name)
    return [name for name in names if (repo / name).is_file() or (repo / name).is_symlink()]


def _git(repo: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return _run_git(["-C", str(repo), *args], check=check, source=str(repo))


def _run_git(args: list[str], *, check: bool, source: str) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(["git", *args], capture_output=True, text=True, check=check)
    except FileNotFoundError:
        raise TemplateRepositoryError(source=source, reason="git is not installed") from None


def _resolve(repo: Path, ref: str) -> str | None:
    """The full hash of the commit `ref` names in `repo`, or None."""
    done = _git(repo, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}", check=False)
    return done.stdout.strip() or None


def _last_line(error: str, fallback: str) -> str:
    lines = error.strip().splitlines()
    return lines[-1] if lines else fallback


@dataclass(frozen=True)
class TemplateHistory:
    """A git repository holding the template's commits, and what its RELEASES file lists.

    `source` says where it came from, for messages.
    """

    path: Path
    source: str
    releases: tuple[Release, ...]

    @property
    def head(self) -> str:
        """The commit the history ends at (the template that is installed or was asked for)."""
        commit = _resolve(self.path, "HEAD")
        if commit is None:
            raise TemplateRepositoryError(source=self.source, reason="it holds no commit")
        return commit

    def latest_release(self, *, prereleases: bool = False) -> Release | None:
        """The newest release, pre-releases only if asked; None if there is none."""
        for release in self.releases:
            if prereleases or not release.version.is_prerelease:
                return release
        return None

    def commit_of(self, ref: str) -> str | None:
        """The commit `ref` (a recorded `_commit`, a release, a branch, a hash) names, or None."""
        if not ref or ref.startswith("-"):
            return None
        # A release may be named by its version alone (`0.2.0` for `v0.2.0`).
        names = [ref, f"v{ref}"] if ref[0].isdigit() and version_of(ref) else [ref]
        return next(filter(None, (_resolve(self.path, name) for name in names)), None)

    def version(self, ref: str, *, recorded: bool = True) -> TemplateVersion:
        """The template version `ref` names, as a project records it.

        Raises UnknownTemplateVersionError if the history does not hold it;
        `recorded` says whether the project recorded `ref` or the user asked for it.
        """
        commit = self.commit_of(ref)
        if commit is None:
            raise UnknownTemplateVersionError(
                ref=ref, source=self.source, latest=self.newest_tag, recorded=recorded
            )
        return self.describe(commit)

    @property
    def newest_tag(self) -> str | None:
        latest = self.latest_release(prereleases=True)
        return latest.tag if latest else None

    def describe(self, commit: str) -> TemplateVersion:
        """Name `commit` after the newest release it descends from (see the module doc)."""
        for release in self.releases:  # newest first
            if not self._is_ancestor(release.commit, commit):
                continue
            if self.same_template(release.commit, commit):
                name = f"{release.tag}-0-g{release.commit[:_ABBREV]}"
                return TemplateVersion(name=name, commit=release.commit, version=release.version)
            count = _git(self.path, "rev-list", "--count", f"{release.commit}..{commit}").stdout
            name = f"{release.tag}-{count.strip()}-g{commit[:_ABBREV]}"
            return TemplateVersion(name=name, commit=commit, version=version_of(name))
        return TemplateVersion(name=commit, commit=commit, version=None)

    def same_template(self, first: str, second: str) -> bool:
        """Whether two commits hold the same copier.yml and template/."""
        done = _git(self.path, "diff", "--quiet", first, second, "--", *TEMPLATE_PATHS, check=False)
        return done.returncode == 0

    def file_at(self, commit: str, path: str) -> str:
        """A file's text at `commit` ('' if it is not there)."""
        done = _git(self.path, "show", f"{commit}:{path}", check=False)
        return done.stdout if done.returncode == 0 else ""

    def has_path(self, commit: str, path: str) -> bool:
        """Whether `commit` holds `path` (a file, or a directory with files)."""
        done = _git(self.path, "ls-tree", "--name-only", commit, "--", path, check=False)
        return done.returncode == 0 and bool(done.stdout.strip())

    def check_out(self, commit: str) -> Path:
        """Put the files of `commit` in the history's directory; return it."""
        done = _git(self.path, "checkout", "--quiet", "--force", commit, "--", check=False)
        if done.returncode:
            raise TemplateRepositoryError(
                source=self.source, reason=_last_line(done.stderr, "git checkout failed")
            )
        return self.path

    def _is_ancestor(self, ancestor: str, commit: str) -> bool:
        done = _git(self.path, "merge-base", "--is-ancestor", ancestor, commit, check=False)
        return done.returncode == 0


def read_history(repo: Path, *, source: str) -> TemplateHistory:
    """The template history of a git repository, and its releases as of its HEAD.

    Releases are the lines of RELEASES at HEAD, and the repository's PEP 440
    version tags if it has any (RELEASES wins where both name a version).
    """
    releases = {release.version: release for release in _tagged_releases(repo)}
    recorded = _git(repo, "show", f"HEAD:{RELEASES_FILE}", check=False)
    for release in parse_releases(recorded.stdout if recorded.returncode == 0 else ""):
        # A shallow history may lack an old release's commit: it is then only
        # a version to compare with, never the base of an update.
        commit = _resolve(repo, release.commit) or release.commit
        releases[release.version] = Release(version=release.version, commit=commit)
    ordered = sorted(releases.values(), key=lambda release: release.version, reverse=True)
    return TemplateHistory(path=repo, source=source, releases=tuple(ordered))


def clone_history(source: str, destination: Path, *, label: str | None = None) -> TemplateHistory:
    """Clone a template repository (a path, a bundle file or an address) into `destination`.

    Every release becomes a `v<version>` tag of the clone: a project may record
    a release by its tag (`v0.1.0`), and copier orders tags to tell an upgrade
    from a downgrade.
    """
    shown = label or source
    done = _run_git(
        ["clone", "--quiet", "--no-checkout", "--", git_address(source), str(destination)],
        check=False,
        source=shown,
    )
    if done.returncode:
        raise TemplateRepositoryError(source=shown, reason=_last_line(done.stderr, "git failed"))
    history = read_history(destination, source=shown)
    for release in history.releases:
        _git(destination, "tag", "--force", release.tag, release.commit, check=False)
    return history


def _tagged_releases(repo: Path) -> list[Release]:
    """The repository's tags that are PEP 440 versions (`v0.1.0`), as releases."""
    listed = _git(repo, "for-each-ref", "--format=%(refname:short)", "refs/tags").stdout
    found = []
    for tag in listed.split():
        version = None if _DESCRIBE.match(tag) else version_of(tag)
        commit = _resolve(repo, f"refs/tags/{tag}") if version is not None else None
        if version is not None and commit is not None:
            found.append(Release(version=version, commit=commit))
    return found
