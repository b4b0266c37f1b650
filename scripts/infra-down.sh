#!/usr/bin/env bash
# Stops what infra-up.sh started: the broker (by its pid file) and the PostgreSQL cluster.
# Leaves the installed packages and PostgreSQL's data in place.
set -uo pipefail
INFRA_DIR=${RTGS_INFRA_DIR:-/var/tmp/rtgs-infra}
if [ -f "$INFRA_DIR/tansu.pid" ]; then
  kill "$(cat "$INFRA_DIR/tansu.pid")" 2>/dev/null && echo "infra-down: broker stopped" >&2
  rm -f "$INFRA_DIR/tansu.pid"
fi
if command -v pg_ctlcluster >/dev/null 2>&1; then
  pg_ctlcluster --skip-systemctl-redirect 15 main stop 2>/dev/null && echo "infra-down: PostgreSQL stopped" >&2
fi
exit 0
