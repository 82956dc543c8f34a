#!/usr/bin/env bash
# The whole test suite: sets up the environment, starts the local brokers that
# are installed but not running, and runs pytest. Extra arguments go to pytest.
source "$(dirname "${BASH_SOURCE[0]}")/bootstrap.sh"

if ! port_open 6379 && command -v redis-server >/dev/null 2>&1; then
  echo "==> starting Redis on 127.0.0.1:6379"
  mkdir -p /var/lib/redis /var/log/redis 2>/dev/null || true
  redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" --appendonly no \
    --dir /var/lib/redis --logfile /var/log/redis/ci.log || true
fi
if ! port_open 5672 && command -v rabbitmq-server >/dev/null 2>&1; then
  echo "==> starting RabbitMQ on 127.0.0.1:5672"
  rabbitmq-server -detached || true
  for _ in $(seq 60); do port_open 5672 && break; sleep 1; done
fi

# PostgreSQL: the Django tests (runtime/tests/django, tests/test_add_django.py) use it.
if ! port_open 5432 && command -v pg_lsclusters >/dev/null 2>&1; then
  echo "==> starting PostgreSQL on 127.0.0.1:5432"
  pg_lsclusters -h | while read -r version cluster _; do
    pg_ctlcluster --skip-systemctl-redirect "$version" "$cluster" start || true
  done
  for _ in $(seq 30); do port_open 5432 && break; sleep 1; done
fi

# Validators of the generated deploy files (tests/test_deploy.py): promtool and
# node/npm and systemd-analyze come from Debian. Installed under CI only, where a missing one fails.
if [ "${CI:-}" = "true" ] && command -v apt-get >/dev/null 2>&1; then
  wanted=()
  command -v promtool >/dev/null 2>&1 || wanted+=(prometheus)
  command -v npm >/dev/null 2>&1 || wanted+=(nodejs npm)
  command -v systemd-analyze >/dev/null 2>&1 || wanted+=(systemd)
  if [ "${#wanted[@]}" -gt 0 ]; then
    echo "==> installing ${wanted[*]} (validators of deploy/)"
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
        apt-get install -y -qq --no-install-recommends "${wanted[@]}"; } >/dev/null || true
  fi
fi

cd "$ROOT"
# Tests run three at a time by default (WORKERGEN_TEST_WORKERS): most of a test's
# time is spent waiting on a worker or a broker, so a third keeps two cores busy.
WORKERS="${WORKERGEN_TEST_WORKERS:-3}"
# Stages: 1. every test but those that kill or restart a broker, in parallel;
# 2. those (marked broker_restarts), one at a time, so no other test loses its
# broker mid-run: under CI=true or with WORKERGEN_TEST_BROKER_RESTARTS=1, else
# they skip; 3. under CI=true, the tests of the Celery and kombu internals the
# runtime subclasses against the oldest releases (scripts/test-oldest.sh).
# Extra arguments run pytest with them once instead. Any failing stage fails the
# whole, "no tests collected" (exit code 5) included.
if [ $# -gt 0 ]; then
  exec "$PY" -m pytest -n "$WORKERS" --dist loadgroup "$@"
fi
if [ "${CI:-}" != "true" ] && [ "${WORKERGEN_TEST_BROKER_RESTARTS:-}" != "1" ]; then
  exec "$PY" -m pytest -n "$WORKERS" --dist loadgroup
fi
status=0
echo "==> stage 1: every test but those that kill or restart a broker"
"$PY" -m pytest -n "$WORKERS" --dist loadgroup -m "not broker_restarts" || status=$?
echo "==> stage 2: the tests that kill or restart a broker, one at a time"
"$PY" -m pytest -n 0 -m broker_restarts || status=$?
if [ "${CI:-}" = "true" ]; then
  echo "==> stage 3: the runtime's internals against the oldest releases allowed"
  bash "$ROOT/scripts/test-oldest.sh" || status=$?
fi
exit "$status"
