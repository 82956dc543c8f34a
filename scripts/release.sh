#!/usr/bin/env bash
# Make a release of workergen, its worker runtime and its template:
#   bash scripts/release.sh 0.2.0 [--no-build | build options...]
#
# The generator, the runtime and the template are released together, with one
# version. Two commits, then both distributions built into dist/ from the second
# (scripts/build.sh; build options such as --no-isolation go to it; --no-build
# leaves the building to the release workflow or a later scripts/build.sh):
#   1. "Release 0.2.0": the version in generator/workergen/__init__.py and
#      runtime/src/workergen_runtime/__init__.py, the generator's pin on the
#      runtime (pyproject.toml: workergen-runtime==0.2.0), the range generated
#      projects depend on (template/pyproject.toml.jinja: >=0.2,<0.3), and the
#      changelog's "Unreleased" section turned into the release's;
#   2. "RELEASES: 0.2.0": RELEASES records 0.2.0 as the template of commit 1,
#      which changes no template file, so both hold the same template.
# Nothing depends on a git tag; see docs/releasing.md for publishing.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

fail() { echo "release: $1" >&2; [ -n "${2:-}" ] && echo "$2" >&2; exit 1; }

version="${1:-}"
[ -n "$version" ] || fail "which version?" "Usage: bash scripts/release.sh 0.2.0 [--no-build | build options...]"
shift
build=yes
if [ "${1:-}" = "--no-build" ]; then
  build=no
  shift
fi
[[ "$version" =~ ^([0-9]+)\.([0-9]+)\.[0-9]+((a|b|rc)[0-9]+)?$ ]] ||
  fail "'$version' is not a release version such as 0.2.0 or 1.0.0rc1"
major="${BASH_REMATCH[1]}"
minor="${BASH_REMATCH[2]}"
prerelease="${BASH_REMATCH[3]}"
[ -z "$(git status --porcelain)" ] ||
  fail "the working tree has uncommitted changes" "Commit them first: a release is a commit."
grep -Eq "^${version//./\\.}[[:space:]]" RELEASES && fail "$version is already in RELEASES"
last="$(grep -Ev '^[[:space:]]*(#|$)' RELEASES | awk '{print $1}' | sort -V | tail -n 1)"
if [ -n "$last" ] && [ "$(printf '%s\n%s\n' "$last" "$version" | sort -V | tail -n 1)" != "$version" ]; then
  fail "$version is older than the last release, $last"
fi
if [ "$build" = yes ]; then
  bash scripts/build.sh --check || fail "cannot build the distributions" "Or release with --no-build."
fi
grep -q '^## Unreleased$' CHANGELOG.md ||
  fail "CHANGELOG.md has no '## Unreleased' section" "Say there what the release changes."

# Projects take the runtime's fixes within the minor release (>=0.2,<0.3); a
# pre-release is named in full, since a range of final releases leaves it out.
lowest="$major.$minor"
[ -n "$prerelease" ] && lowest="$version"
range=">=$lowest,<$major.$((minor + 1))"

# set FILE SED-EXPRESSION TEXT: edit FILE, then make sure it holds TEXT.
set_in() {
  sed -i.bak -E "$2" "$1" && rm "$1.bak"
  grep -qF -- "$3" "$1" || fail "could not set the version in $1" "Expected it to hold: $3"
}
generator_init=generator/workergen/__init__.py
runtime_init=runtime/src/workergen_runtime/__init__.py
template_pyproject=template/pyproject.toml.jinja
set_in "$generator_init" "s/^__version__ = \"[^\"]*\"/__version__ = \"$version\"/" \
  "__version__ = \"$version\""
set_in "$runtime_init" "s/^__version__ = \"[^\"]*\"/__version__ = \"$version\"/" \
  "__version__ = \"$version\""
set_in pyproject.toml "s/\"workergen-runtime==[^\"]*\"/\"workergen-runtime==$version\"/" \
  "\"workergen-runtime==$version\""
set_in "$template_pyproject" \
  "s/^(    \"workergen-runtime\{\{.*\}\})>=[^,\"]*,<[^,\"]*\",$/\1$range\",/" "}}$range\","
sed -i.bak "s/^## Unreleased\$/## Unreleased\n\n## $version/" CHANGELOG.md && rm CHANGELOG.md.bak

git add "$generator_init" "$runtime_init" pyproject.toml "$template_pyproject" CHANGELOG.md
git commit --quiet --no-verify -m "Release $version" \
  -m "workergen, workergen-runtime and the template are $version; projects depend on workergen-runtime$range."
commit="$(git rev-parse HEAD)"
echo "$version $commit" >>RELEASES
git add RELEASES
git commit --quiet --no-verify -m "RELEASES: $version" \
  -m "RELEASES records $version as the template of $commit."
echo "Released $version (template of ${commit:0:12}; projects depend on workergen-runtime$range)."
if [ "$build" = no ]; then
  echo "Next: build both distributions (bash scripts/build.sh) and publish them together (see docs/releasing.md)."
  exit 0
fi
bash scripts/build.sh "$@" ||
  fail "the release commits are made, but building failed" \
    "Fix the cause, then build with: bash scripts/build.sh $*"
echo "Next: publish both distributions in dist/ together (see docs/releasing.md)."
