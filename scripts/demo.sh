#!/usr/bin/env bash
# The main job: generate a demo project with workergen, start one of its
# workers, dispatch the hello job from another process and print the result.
source "$(dirname "${BASH_SOURCE[0]}")/bootstrap.sh"

DEMO="$ROOT/.demo/demo"
rm -rf "$ROOT/.demo"
mkdir -p "$ROOT/.demo"

echo "==> workergen new $DEMO"
workergen new "$DEMO" --defaults --name demo --result-backend redis

if [ "${DEMO_BROKER:-auto}" != filesystem ] && port_open 6379; then
  export BROKER_URL="redis://127.0.0.1:6379/0"
  export RESULT_BACKEND_URL="redis://127.0.0.1:6379/1"
  echo "==> broker: Redis at 127.0.0.1:6379"
else
  export BROKER_URL="filesystem://$ROOT/.demo/broker"
  export RESULT_BACKEND_URL="file://$ROOT/.demo/results"
  mkdir -p "$ROOT/.demo/broker/messages" "$ROOT/.demo/broker/processed" "$ROOT/.demo/results"
  echo "==> No Redis on 127.0.0.1:6379: using a folder as broker."
  echo "    DEVELOPMENT ONLY - it is slow and loses messages on a crash; use Redis,"
  echo "    RabbitMQ or SQS (BROKER_URL) anywhere else."
fi
export QUEUE_NAMESPACE="demo$$" LOG_FORMAT=text PYTHONPATH="$DEMO"

cd "$DEMO"
"$PY" -m demo queue work --concurrency 1 --pidfile "$ROOT/.demo/worker.pid" \
  >"$ROOT/.demo/worker.log" 2>&1 &
worker=$!
trap 'kill -TERM "$worker" 2>/dev/null; wait "$worker" 2>/dev/null || true' EXIT
for _ in $(seq 60); do grep -q "ready\." "$ROOT/.demo/worker.log" 2>/dev/null && break; sleep 0.5; done
grep -q "ready\." "$ROOT/.demo/worker.log" || { cat "$ROOT/.demo/worker.log"; exit 1; }
echo "==> worker ready (log: .demo/worker.log)"

echo "==> python -m demo queue dispatch hello --kwargs '{\"name\": \"workergen\"}' --wait 30"
"$PY" -m demo queue dispatch hello --kwargs '{"name": "workergen"}' --wait 30
grep "Hello, workergen!" "$ROOT/.demo/worker.log" | tail -n 1 | sed 's/^/    worker log: /'
