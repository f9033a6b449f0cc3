#!/usr/bin/env bash
# rejoin.sh (hand mode) with a Redis rendezvous: a private redis-server on a free loopback port, no persistence,
# killed at the end. Skipped (exit 0 with a note) when redis-server is not installed.
# Usage: rejoin_redis.sh DREAMDDP_BIN POLICY
set -euo pipefail
[ -x /usr/bin/redis-server ] || { echo "SKIP: redis-server not installed"; exit 0; }
PORT=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
D=$(mktemp -d /tmp/dd_redis.XXXXXX)
/usr/bin/redis-server --port "$PORT" --bind 127.0.0.1 --save '' --appendonly no --loglevel warning --dir "$D" \
  > "$D/out" 2>&1 &
SERVER=$!
trap 'kill -9 $SERVER 2>/dev/null || true; rm -rf "$D"' EXIT
for _ in $(seq 1 100); do
  (exec 3<>/dev/tcp/127.0.0.1/$PORT) 2>/dev/null && break
  sleep 0.05
done
RDZV_URL="redis://127.0.0.1:$PORT/rejoin-test" bash "$(dirname "$0")/rejoin.sh" "$1" "$2" hand
