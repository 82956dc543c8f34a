#!/usr/bin/env bash
# The main job: generate a demo project with workergen, start one of its
# workers, dispatch the hello job from another process and show that it ran.
#
# With Redis on 127.0.0.1:6379 the demo uses a database of its own
# (DEMO_REDIS_DB, default 13) and a queue namespace of its own, and deletes
# every key it created when it ends, also when it fails. Without Redis (or with
# DEMO_BROKER=filesystem) the broker is a folder and there is no result
# backend: the job's output is read from the worker's log.
# DEMO_DIR: where the project, the worker's log and the folder broker go
# (default .demo/ of the checkout); DEMO_NAMESPACE: the queue namespace.
# The project is not installed: it runs in the checkout's environment, where
# bootstrap.sh installed workergen-runtime editable from runtime/ (the runtime
# is not on the package index before its first release).
source "$(dirname "${BASH_SOURCE[0]}")/bootstrap.sh"

DEMO_DIR="${DEMO_DIR:-$ROOT/.demo}"
DEMO_REDIS_DB="${DEMO_REDIS_DB:-13}"
DEMO="$DEMO_DIR/demo"
LOG="$DEMO_DIR/worker.log"
DISPATCHED="$DEMO_DIR/dispatch.out"
case "$DEMO_REDIS_DB" in
  0 | 1) echo "DEMO_REDIS_DB=$DEMO_REDIS_DB: pick a database of the demo's own (2-15)." >&2; exit 2 ;;
  [2-9] | 1[0-5]) ;;
  *) echo "DEMO_REDIS_DB=$DEMO_REDIS_DB: expected a Redis database number from 2 to 15." >&2; exit 2 ;;
esac
# Only what an earlier run left: DEMO_DIR may hold files of its owner.
rm -rf "$DEMO" "$DEMO_DIR/broker" "$LOG" "$DISPATCHED" "$DEMO_DIR/worker.pid"
mkdir -p "$DEMO_DIR"

# The runtime the project runs on is this checkout's, whatever WORKERGEN_VENV holds.
"$PY" - "$ROOT/runtime" "$VENV" <<'PYEOF'
import sys
from pathlib import Path

checkout, venv = Path(sys.argv[1]).resolve(), sys.argv[2]
install = f"{venv}/bin/python -m pip install -e {checkout}"
try:
    import workergen_runtime
except ImportError:
    sys.exit(f"The environment {venv} has no workergen-runtime: {install}")
found = Path(workergen_runtime.__file__).resolve().parent
if not found.is_relative_to(checkout):
    sys.exit(
        f"The demo's Python imports workergen-runtime from {found} (PYTHONPATH or {venv}),"
        f" not from this checkout ({checkout}): {install}"
    )
print(f"==> workergen-runtime {workergen_runtime.__version__} from {checkout} (this checkout)")
PYEOF

echo "==> workergen new $DEMO"
workergen new "$DEMO" --defaults --name demo --result-backend redis

# A namespace of this run (DEMO_NAMESPACE): its lanes, bindings and keys never
# meet anyone else's.
export QUEUE_NAMESPACE="${DEMO_NAMESPACE:-demo$$}" LOG_FORMAT=text PYTHONPATH="$DEMO"
if [ "${DEMO_BROKER:-auto}" != filesystem ] && port_open 6379; then
  redis_url="redis://127.0.0.1:6379/$DEMO_REDIS_DB"
  export BROKER_URL="$redis_url" RESULT_BACKEND_URL="$redis_url"
  echo "==> broker and result backend: Redis at 127.0.0.1:6379, database $DEMO_REDIS_DB"
  echo "    (DEMO_REDIS_DB), namespace $QUEUE_NAMESPACE; the demo deletes its keys at the end."
  wait_flag=(--wait 30)
else
  export BROKER_URL="filesystem://$DEMO_DIR/broker" RESULT_BACKEND_URL=""
  mkdir -p "$DEMO_DIR/broker/messages" "$DEMO_DIR/broker/processed"
  if [ "${DEMO_BROKER:-auto}" = filesystem ]; then
    echo "==> broker: a folder ($DEMO_DIR/broker), as DEMO_BROKER=filesystem asks; no result backend."
  else
    echo "==> broker: no Redis on 127.0.0.1:6379, so a folder ($DEMO_DIR/broker); no result backend."
  fi
  echo "    DEVELOPMENT ONLY - it is slow and loses messages on a crash; use Redis,"
  echo "    RabbitMQ or SQS (BROKER_URL) anywhere else."
  redis_url=""
  wait_flag=()
fi

# Deletes the keys of this run: those holding its namespace as a word (lanes,
# bindings, unacked jobs, locks, idempotency keys), the result of its job, and
# its entries in kombu's table of binding deadlines, which every namespace
# shares. Says how many; exits 1 when anything of the run is still there.
forget_redis_keys() {
  # The job's id, from the dispatch's first line (also when its wait failed).
  task_id="$(sed -n 's/^dispatched .* id=\([^ ]*\).*/\1/p' "$DISPATCHED" 2>/dev/null || true)"
  "$PY" - "$redis_url" "$QUEUE_NAMESPACE" "$task_id" <<'PYEOF'
import re, sys
import redis

url, namespace, task_id = sys.argv[1:]
ours = re.compile(rf"(?:^|[.:]){re.escape(namespace)}[.:]")
result = f"celery-task-meta-{task_id}" if task_id else None
deadlines = "_kombu.binding_deadlines"
client = redis.Redis.from_url(url, socket_timeout=10, decode_responses=True)

def left():
    keys = [k for k in client.scan_iter(count=1000) if ours.search(k) or k == result]
    entries = [m for m in client.zrange(deadlines, 0, -1) if ours.search(m)]
    return keys, entries

try:
    keys, entries = left()
    if keys:
        client.delete(*keys)
    if entries:
        client.zrem(deadlines, *entries)
    keys_left, entries_left = left()
except redis.RedisError as error:
    sys.exit(f"Could not delete the demo's Redis keys (namespace {namespace}, {url}): {error}")
db = client.connection_pool.connection_kwargs.get("db", 0)
print(f"==> deleted the demo's {len(keys)} Redis keys (namespace {namespace}, database {db})"
      f" and {len(entries)} binding deadlines; {len(keys_left) + len(entries_left)} left")
sys.exit(1 if keys_left or entries_left else 0)
PYEOF
}

worker=""
finish() {
  status=$?
  if [ -n "$worker" ]; then
    kill -TERM "$worker" 2>/dev/null || true
    wait "$worker" 2>/dev/null || true
  fi
  if [ -n "$redis_url" ]; then
    forget_redis_keys || status=1
  fi
  exit "$status"
}
trap finish EXIT

cd "$DEMO"
"$PY" -m demo queue work --concurrency 1 --pidfile "$DEMO_DIR/worker.pid" >"$LOG" 2>&1 &
worker=$!
for _ in $(seq 60); do grep -q "ready\." "$LOG" 2>/dev/null && break; sleep 0.5; done
grep -q "ready\." "$LOG" || { cat "$LOG"; exit 1; }
echo "==> worker ready (log: $LOG)"

echo "==> python -m demo queue dispatch hello --kwargs '{\"name\": \"workergen\"}'${wait_flag[*]:+ ${wait_flag[*]}}"
"$PY" -m demo queue dispatch hello --kwargs '{"name": "workergen"}' "${wait_flag[@]}" |
  tee "$DISPATCHED"
# Without a result backend the worker's log is where the job shows it ran.
for _ in $(seq 60); do grep -q "Hello, workergen!" "$LOG" && break; sleep 0.5; done
grep "Hello, workergen!" "$LOG" | tail -n 1 | sed 's/^/    worker log: /' | grep . ||
  { echo "The hello job did not run within 30 s; the worker's log:" >&2; cat "$LOG" >&2; exit 1; }
