#!/usr/bin/env bash
# The tests that drive the Celery and kombu internals the worker runtime
# subclasses (the runtime's own tests for every broker, the render matrix, the
# workers and the scheduler on Redis and RabbitMQ), in a second environment
# holding the oldest releases the projects allow (constraints/oldest.txt). CI
# runs it after the whole suite; extra arguments go to pytest (e.g. -k redis).
# Expects the brokers scripts/test.sh starts.
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export WORKERGEN_VENV="${WORKERGEN_VENV:-$ROOT/.venv}-oldest"
export WORKERGEN_CONSTRAINTS="$ROOT/constraints/oldest.txt"
source "$ROOT/scripts/bootstrap.sh"

cd "$ROOT"
"$PY" -m pip list --format=freeze 2>/dev/null | grep -iE '^(celery|kombu|billiard|redis)==' |
  sed 's/^/==> oldest: /'
exec "$PY" -m pytest -n 2 --dist loadgroup \
  tests/test_render_matrix.py tests/test_e2e_redis.py tests/test_deadletter_redis.py \
  tests/test_deadletter_rabbitmq.py tests/test_e2e_scheduling.py tests/test_cron_locks.py \
  tests/test_runtime_suite.py "$@"
