#!/usr/bin/env bash
# Terminal 1 of 3: data center DC1 of the production engine (Kafka journal + PostgreSQL).
# The three run-dcN.sh differ only in this environment. Start the servers first:
#   scripts/infra-up.sh        (then, in three terminals: run-dc1.sh, run-dc2.sh, run-dc3.sh)
set -euo pipefail
export CENTER_ID=1 CENTER_COUNT=3 PORT_OFFSET=0 RTGS_DB=${RTGS_DB:-rtgs_dc1}
exec "$(dirname "$0")/node.sh"
