#!/usr/bin/env bash
# The cluster of examples/cluster/Procfile with plain background processes, for those
# without honcho: 2 API processes ($CRONWHEEL_API1_PORT, $CRONWHEEL_API2_PORT: 8081 and
# 8082 by default), 2 schedulers, 3 workers, on the PostgreSQL database $CRONWHEEL_DB,
# which it creates if it does not exist. Run it in the virtualenv where cronwheel is
# installed (the `cronwheel` command; or set CRONWHEEL=/path/to/bin/cronwheel):
#
#   examples/cluster/run-local.sh          # Ctrl-C (or SIGTERM) stops everything gracefully
#
# Settings: examples/cluster/env.sh, where what you exported wins. Each process logs to
# $LOGS/<name>.log (default examples/cluster/logs). Unlike honcho, it supervises its
# processes as systemd's Restart=always would: one that exits without a stop being asked
# (`kill -9` one to watch a failover) is logged here and started again after
# $RESTART_DELAY seconds (default 2), so the rest of the cluster keeps running
# (docs/decisions/0046-a-supervised-local-cluster.md).
set -euo pipefail
cd "$(dirname "$0")/../.."

. examples/cluster/env.sh
export PYTHONPATH="examples/cluster${PYTHONPATH:+:$PYTHONPATH}"

CRONWHEEL=${CRONWHEEL:-cronwheel}
LOGS=${LOGS:-examples/cluster/logs}
RESTART_DELAY=${RESTART_DELAY:-2}
mkdir -p "$LOGS"

"$CRONWHEEL" migrate --create-database

# How a process ended, from the status `wait` gave.
ended() {
  if (($1 > 128)); then
    echo "killed by SIG$(kill -l $(($1 - 128)))"
  else
    echo "exit status $1"
  fi
}

# Run one process until a stop is asked (SIGTERM or SIGINT to this subshell, which passes
# SIGTERM on, once: Ctrl-C's SIGINT reaches the process too, but not while it is starting,
# when a background process ignores SIGINT): whenever it exits on its own, say so and
# start it again.
supervise() {
  local name=$1 child=0 stop=0 status sleeper
  shift
  trap 'if [[ $stop == 0 && $child != 0 ]]; then kill -TERM "$child" 2>/dev/null || true; fi; stop=1' TERM INT
  : >"$LOGS/$name.log"
  while [[ $stop == 0 ]]; do
    "$CRONWHEEL" "$@" >>"$LOGS/$name.log" 2>&1 &
    child=$!
    echo "$name: pid $child (log $LOGS/$name.log)"
    if [[ $stop != 0 ]]; then  # the stop came before $child was known
      kill -TERM "$child" 2>/dev/null || true
    fi
    # A trapped signal interrupts `wait`: wait again until the process has really ended
    # (then it is reaped, and `kill -0` finds nothing).
    while :; do
      status=0
      wait "$child" || status=$?
      kill -0 "$child" 2>/dev/null || break
    done
    if [[ $stop != 0 ]]; then
      echo "$name: pid $child stopped ($(ended "$status"))"
      break
    fi
    echo "$name: pid $child exited on its own ($(ended "$status")):" \
      "starting it again in $RESTART_DELAY s"
    child=0
    sleep "$RESTART_DELAY" &
    sleeper=$!
    wait "$sleeper" || true  # a stop asked meanwhile ends the wait
    kill "$sleeper" 2>/dev/null || true
  done
}

supervisors=()
start() {
  supervise "$@" &
  supervisors+=($!)
}

stop() {
  trap - INT TERM
  echo "stopping: SIGTERM to every process (workers finish or release their runs)"
  kill -TERM "${supervisors[@]}" 2>/dev/null || true
  wait
  exit 0
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

# Until Ctrl-C or SIGTERM: the trap stops every process and exits once they have ended.
wait
