# Sourced by the other scripts: one virtual environment for workergen, its
# tests and every project they render, created and kept up to date here.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${WORKERGEN_VENV:-$ROOT/.venv}"
PY="$VENV/bin/python"

pick_python() {
  for candidate in python3.13 python3.12 python3.11 python3; do
    if command -v "$candidate" >/dev/null 2>&1 &&
      "$candidate" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
      echo "$candidate"
      return
    fi
  done
  echo "workergen needs Python 3.11 or newer on PATH." >&2
  exit 1
}

if [ ! -x "$PY" ]; then
  echo "==> creating $VENV"
  "$(pick_python)" -m venv "$VENV"
fi
# WORKERGEN_CONSTRAINTS: a pip constraints file the environment is installed
# with (scripts/test-oldest.sh uses constraints/oldest.txt).
CONSTRAINTS="${WORKERGEN_CONSTRAINTS:-}"
stamp="$VENV/.workergen-installed"
# WORKERGEN_SKIP_INSTALL=1: use the environment as it is (the suite's tests of
# these scripts run them in the environment the suite runs in).
if [ "${WORKERGEN_SKIP_INSTALL:-}" != 1 ] && {
  [ ! -f "$stamp" ] || [ "$ROOT/pyproject.toml" -nt "$stamp" ] ||
    [ "$ROOT/runtime/pyproject.toml" -nt "$stamp" ] ||
    { [ -n "$CONSTRAINTS" ] && [ "$CONSTRAINTS" -nt "$stamp" ]; }
}; then
  echo "==> installing workergen, its worker runtime and its development tools${CONSTRAINTS:+ (constraints: $CONSTRAINTS)}"
  "$PY" -m pip install --quiet --upgrade pip
  # One install: the generator depends on the runtime of the same release, found here.
  "$PY" -m pip install --quiet ${CONSTRAINTS:+-c "$CONSTRAINTS"} -e "$ROOT/runtime" -e "$ROOT[dev]"
  touch "$stamp"
fi
export PATH="$VENV/bin:$PATH"

port_open() { "$PY" - "$1" <<'PYEOF'
import socket, sys
try:
    socket.create_connection(("127.0.0.1", int(sys.argv[1])), 1).close()
except OSError:
    sys.exit(1)
PYEOF
}
