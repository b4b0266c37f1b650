#!/usr/bin/env bash
# Stops what infra-up.sh started: the broker (by its pid file, then by its command line if it is
# still listening) and the PostgreSQL cluster. Leaves the installed packages and PostgreSQL's
# data in place (and the broker's sqlite file: `rm $RTGS_INFRA_DIR/tansu.db*` wipes it). Fails if
# the broker is still listening afterwards. RTGS_INFRA_DIR and RTGS_BROKER_PORT as infra-up.sh.
# With `broker` only the broker is stopped.
set -uo pipefail
INFRA_DIR=${RTGS_INFRA_DIR:-/var/tmp/rtgs-infra}
PORT=${RTGS_BROKER_PORT:-9092}

port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

if [ -f "$INFRA_DIR/tansu.pid" ]; then
  kill "$(cat "$INFRA_DIR/tansu.pid")" 2>/dev/null
  rm -f "$INFRA_DIR/tansu.pid"
fi
for _ in $(seq 50); do port_open "$PORT" || break; sleep 0.1; done
if port_open "$PORT"; then
  pkill -f "tansu broker --listener-url tcp://127.0.0.1:$PORT" 2>/dev/null
  for _ in $(seq 50); do port_open "$PORT" || break; sleep 0.1; done
fi
if port_open "$PORT"; then
  echo "infra-down: error: something still listens on 127.0.0.1:$PORT" >&2
  exit 1
fi
echo "infra-down: broker stopped" >&2
[ "${1:-all}" = broker ] && exit 0
if command -v pg_ctlcluster >/dev/null 2>&1; then
  pg_ctlcluster --skip-systemctl-redirect 15 main stop >/dev/null 2>&1 && echo "infra-down: PostgreSQL stopped" >&2
fi
exit 0
