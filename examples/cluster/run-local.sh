#!/usr/bin/env bash
# The cluster of examples/cluster/Procfile with plain background processes, for those
# without honcho: 2 API processes ($CRONWHEEL_API1_PORT, $CRONWHEEL_API2_PORT: 8081 and
# 8082 by default), 2 schedulers, 3 workers, on the PostgreSQL database $CRONWHEEL_DB,
# which it creates if it does not exist. Run it in the virtualenv where cronwheel is
# installed (the `cronwheel` command; or set CRONWHEEL=/path/to/bin/cronwheel):
#
#   examples/cluster/run-local.sh          # Ctrl-C stops everything gracefully
#
# Settings: examples/cluster/env.sh, where what you exported wins. Each process logs to
# $LOGS/<name>.log (default examples/cluster/logs). Like honcho, it stops the whole
# cluster when one process exits.
set -euo pipefail
cd "$(dirname "$0")/../.."

. examples/cluster/env.sh
export PYTHONPATH="examples/cluster${PYTHONPATH:+:$PYTHONPATH}"

CRONWHEEL=${CRONWHEEL:-cronwheel}
LOGS=${LOGS:-examples/cluster/logs}
mkdir -p "$LOGS"

"$CRONWHEEL" migrate --create-database

pids=()
stopping=0
start() {
  local name=$1
  shift
  "$CRONWHEEL" "$@" >"$LOGS/$name.log" 2>&1 &
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

# --db, --admin-token, --shards and --shard-lease come from the environment (env.sh).
# Metrics: the APIs at /metrics, schedulers and workers on the ports env.sh names
# (examples/observability/prometheus.yml scrapes them).
start api1 api --port "$CRONWHEEL_API1_PORT"
start api2 api --port "$CRONWHEEL_API2_PORT"
for i in 1 2; do
  port="CRONWHEEL_SCHEDULER${i}_METRICS_PORT"
  start "scheduler$i" scheduler --metrics-port "${!port}"
done
for i in 1 2 3; do
  port="CRONWHEEL_WORKER${i}_METRICS_PORT"
  start "worker$i" worker --app hello:worker --pool default=10 --lease 30 --metrics-port "${!port}"
done

# Until Ctrl-C (the trap stops everything), or until one process exits on its own.
status=0
wait -n || status=$?
if [[ $stopping == 0 ]]; then  # Ctrl-C reaches the processes too: they exit with 0
  echo "a process exited (status $status): stopping the cluster"
  stop
  exit "$status"
fi
