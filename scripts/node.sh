#!/usr/bin/env bash
# Runs one center of the production engine (`rtgs node`) in the foreground; run-dc1.sh ..
# run-dc3.sh call it with their environment. Builds the release binary first (once; cargo
# serializes concurrent builds). Needs the servers: scripts/infra-up.sh.
#
#   CENTER_ID, CENTER_COUNT (3), PORT_OFFSET, RTGS_DB     set by run-dcN.sh
#   RTGS_BOOTSTRAP (127.0.0.1:9092), RTGS_TOPIC_PREFIX (rtgs), RTGS_SEQ_DB (rtgs_seq)
#   PGHOST/PGPORT/PGUSER/PGPASSWORD                       default 127.0.0.1/5432/postgres/postgres
#   RTGS_BIN     use this binary instead of building target/release/rtgs
set -euo pipefail
cd "$(dirname "$0")/.."
: "${CENTER_ID:?set CENTER_ID (use scripts/run-dc1.sh .. run-dc3.sh)}"
port_open() { (exec 3<>"/dev/tcp/${1%:*}/${1#*:}") 2>/dev/null; }
BOOTSTRAP=${RTGS_BOOTSTRAP:-127.0.0.1:9092}
port_open "$BOOTSTRAP" || { echo "node.sh: no broker at $BOOTSTRAP (run scripts/infra-up.sh)" >&2; exit 1; }
port_open "${PGHOST:-127.0.0.1}:${PGPORT:-5432}" \
  || { echo "node.sh: no PostgreSQL at ${PGHOST:-127.0.0.1}:${PGPORT:-5432} (run scripts/infra-up.sh)" >&2; exit 1; }
if [ -z "${RTGS_BIN:-}" ]; then
  cargo build --release -p rtgs --quiet
  RTGS_BIN=target/release/rtgs
fi
exec "$RTGS_BIN" node
