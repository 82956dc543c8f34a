#!/usr/bin/env bash
# Make a release of workergen and its template: bash scripts/release.sh 0.2.0
#
# Records the release in RELEASES (the version and the commit whose copier.yml
# and template/ it ships), sets the version in workergen/__init__.py, turns the
# changelog's "Unreleased" section into the release's, and commits. Nothing
# depends on a git tag; see docs/releasing.md for building and publishing.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

fail() { echo "release: $1" >&2; [ -n "${2:-}" ] && echo "$2" >&2; exit 1; }

version="${1:-}"
[ -n "$version" ] || fail "which version?" "Usage: bash scripts/release.sh 0.2.0"
[[ "$version" =~ ^[0-9]+(\.[0-9]+)*((a|b|rc)[0-9]+)?$ ]] ||
  fail "'$version' is not a release version such as 0.2.0 or 1.0.0rc1"
[ -z "$(git status --porcelain)" ] ||
  fail "the working tree has uncommitted changes" "Commit them first: a release is a commit."
grep -Eq "^${version//./\\.}[[:space:]]" RELEASES && fail "$version is already in RELEASES"
last="$(grep -Ev '^[[:space:]]*(#|$)' RELEASES | awk '{print $1}' | sort -V | tail -n 1)"
if [ -n "$last" ] && [ "$(printf '%s\n%s\n' "$last" "$version" | sort -V | tail -n 1)" != "$version" ]; then
  fail "$version is older than the last release, $last"
fi
grep -q '^## Unreleased$' CHANGELOG.md ||
  fail "CHANGELOG.md has no '## Unreleased' section" "Say there what the release changes."

commit="$(git rev-parse HEAD)"
echo "$version $commit" >>RELEASES
init=generator/workergen/__init__.py
sed -i.bak -E "s/^__version__ = \"[^\"]*\"/__version__ = \"$version\"/" "$init" && rm "$init.bak"
sed -i.bak "s/^## Unreleased\$/## Unreleased\n\n## $version/" CHANGELOG.md && rm CHANGELOG.md.bak
git add RELEASES "$init" CHANGELOG.md
git commit --quiet --no-verify -m "Release $version" \
  -m "RELEASES records $version as the template of $commit."
echo "Released $version (template of ${commit:0:12}) in commit $(git rev-parse --short=12 HEAD)."
echo "Next: python -m build, then publish dist/ (see docs/releasing.md)."
