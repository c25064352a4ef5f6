#!/usr/bin/env bash
# The cluster of examples/cluster/Procfile with plain background processes, for those
# without honcho: 2 API processes (ports 8081, 8082), 2 schedulers, 3 workers, on the
# PostgreSQL database $CRONWHEEL_DB (created beforehand: createdb cronwheel).
#
#   examples/cluster/run-local.sh          # Ctrl-C stops everything gracefully
#
# Settings come from examples/cluster/cluster.env unless already in the environment.
# Each process logs to $LOGS/<name>.log (default examples/cluster/logs). Like honcho,
# it stops the whole cluster when one process exits.
set -euo pipefail
cd "$(dirname "$0")/../.."

while IFS='=' read -r key value; do
  [[ -z "$key" || "$key" == \#* ]] && continue
  [[ -z "${!key:-}" ]] && export "$key=$value"
done < examples/cluster/cluster.env

PYTHON=${PYTHON:-python}
LOGS=${LOGS:-examples/cluster/logs}
mkdir -p "$LOGS"

"$PYTHON" -m cronwheel migrate --db "$CRONWHEEL_DB"

pids=()
stopping=0
start() {
  local name=$1
  shift
  "$PYTHON" -m cronwheel "$@" >"$LOGS/$name.log" 2>&1 &
  pids+=($!)
  echo "$name: pid $! (log $LOGS/$name.log)"
}

stop() {
  trap - INT TERM
  stopping=1
  echo "stopping: SIGTERM to ${pids[*]} (workers finish or release their runs)"
  kill -TERM "${pids[@]}" 2>/dev/null || true
  wait
}
trap stop INT TERM

for i in 1 2; do
  start "api$i" api --db "$CRONWHEEL_DB" --port "808$i" --admin-token "$CRONWHEEL_ADMIN_TOKEN"
done
for i in 1 2; do
  start "scheduler$i" scheduler --db "$CRONWHEEL_DB" --shards "$CRONWHEEL_SHARDS" \
    --shard-lease "$CRONWHEEL_SHARD_LEASE"
done
for i in 1 2 3; do
  start "worker$i" worker --db "$CRONWHEEL_DB" --app hello:worker --pool default=10 --lease 30
done

# Until Ctrl-C (the trap stops everything), or until one process exits on its own.
status=0
wait -n || status=$?
if [[ $stopping == 0 ]]; then  # Ctrl-C reaches the processes too: they exit with 0
  echo "a process exited (status $status): stopping the cluster"
  stop
  exit "$status"
fi
