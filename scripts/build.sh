#!/usr/bin/env bash
# Build both distributions of this repository into one folder:
#   bash scripts/build.sh [--outdir DIR] [python -m build options...]
#   bash scripts/build.sh --check   (only checks that it can build, as release.sh does first)
#
# workergen (the root pyproject.toml: its sdist, then its wheel from the sdist)
# and workergen-runtime (runtime/), by default into dist/. That folder then holds
# everything a user installs: `pip install --find-links dist workergen`, and a
# generated project's `pip install --find-links dist -e .`.
# Other options go to `python -m build` (for example --no-isolation, to build
# offline with the build backends already installed). PYTHON names the
# interpreter; by default the checkout's .venv, else python3.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

fail() { echo "build: $1" >&2; [ -n "${2:-}" ] && echo "$2" >&2; exit 1; }

outdir=dist
check_only=no
if [ "${1:-}" = "--check" ]; then
  check_only=yes
  shift
fi
if [ "${1:-}" = "--outdir" ]; then
  [ -n "${2:-}" ] || fail "--outdir needs a folder" "Usage: bash scripts/build.sh [--outdir DIR] [build options...]"
  outdir="$2"
  shift 2
fi
python="${PYTHON:-}"
if [ -z "$python" ]; then
  python=python3
  [ -x .venv/bin/python ] && python=.venv/bin/python
fi
"$python" -m build --version >/dev/null 2>&1 ||
  fail "$python has no 'build' module" "Install it first: $python -m pip install build"
[ "$check_only" = yes ] && exit 0

mkdir -p "$outdir"
outdir="$(cd "$outdir" && pwd)"
for source in . runtime; do
  "$python" -m build --outdir "$outdir" "$@" "$source" ||
    fail "building $source failed (see above)" "Nothing of it was published; fix it and run this again."
done
version="$("$python" -c 'import re, sys; print(re.search(r"^__version__ = \"([^\"]+)\"", open(sys.argv[1]).read(), re.M).group(1))' generator/workergen/__init__.py)"
echo "Built workergen and workergen-runtime $version into $outdir:"
ls -1 "$outdir" | grep -E "^workergen(_runtime)?-${version//./\\.}[.-]" | sed 's/^/  /'
