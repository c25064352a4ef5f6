# The settings of the example cluster, for what you have not set yourself: a value you
# exported before wins. Source it from the repository root, in each shell you use:
#
#   . examples/cluster/env.sh
#
# The Procfile and run-local.sh source it too. POSIX sh, so that honcho's `sh -c` can.

# The PostgreSQL database every process shares (`cronwheel migrate --create-database`
# creates it). A password in it is never printed: processes show it as ***.
export CRONWHEEL_DB="${CRONWHEEL_DB:-postgresql://postgres@127.0.0.1:5432/cronwheel}"
# The bootstrap system-admin token of the API processes (at least 16 characters). They
# listen on 127.0.0.1 only; change it before you let anything else reach them.
export CRONWHEEL_ADMIN_TOKEN="${CRONWHEEL_ADMIN_TOKEN:-local-cluster-admin-token-change-me}"
# The key that encrypts webhooks' secret headers (Authorization, X-Api-Key…) at rest:
# every API and worker needs the same one (`cronwheel secrets new-key` makes one; a list
# NEW,OLD rotates it: docs/security.md#secrets-at-rest). This one is for this example
# only: make your own.
export CRONWHEEL_SECRETS_KEY="${CRONWHEEL_SECRETS_KEY:-3O-FTHqnfsDPNuGfL1d8cMKn41fSn2TQJWiIDNhnVIE=}"
# Where the two API processes listen.
export CRONWHEEL_API1_PORT="${CRONWHEEL_API1_PORT:-8081}"
export CRONWHEEL_API2_PORT="${CRONWHEEL_API2_PORT:-8082}"
# Where the schedulers and workers serve Prometheus metrics (--metrics-port), for
# examples/observability/prometheus.yml; the APIs serve theirs at /metrics.
export CRONWHEEL_SCHEDULER1_METRICS_PORT="${CRONWHEEL_SCHEDULER1_METRICS_PORT:-9461}"
export CRONWHEEL_SCHEDULER2_METRICS_PORT="${CRONWHEEL_SCHEDULER2_METRICS_PORT:-9462}"
export CRONWHEEL_WORKER1_METRICS_PORT="${CRONWHEEL_WORKER1_METRICS_PORT:-9471}"
export CRONWHEEL_WORKER2_METRICS_PORT="${CRONWHEEL_WORKER2_METRICS_PORT:-9472}"
export CRONWHEEL_WORKER3_METRICS_PORT="${CRONWHEEL_WORKER3_METRICS_PORT:-9473}"
# Every scheduler must use the same shard count.
export CRONWHEEL_SHARDS="${CRONWHEEL_SHARDS:-64}"
export CRONWHEEL_SHARD_LEASE="${CRONWHEEL_SHARD_LEASE:-10}"
# The CLI (`cronwheel jobs …`) talks to the first API process with the admin token.
export CRONWHEEL_URL="${CRONWHEEL_URL:-http://127.0.0.1:$CRONWHEEL_API1_PORT}"
export CRONWHEEL_TOKEN="${CRONWHEEL_TOKEN:-$CRONWHEEL_ADMIN_TOKEN}"
