#!/usr/bin/env bash
# bench-compare.sh: the workloads of issue 16 side by side (see docs/benchmark.md#side-by-side).
# Starts its own `kelp server` (master, volume server with fsync, filer, S3) in a temporary
# directory, runs `kelp benchmark suite` against it, prints the table and removes everything.
#
#   scripts/bench-compare.sh              # full sizes (a few minutes)
#   SCALE=0.1 scripts/bench-compare.sh    # a quicker run
#   KELP_BIN=/path/to/kelp                # use a built binary instead of building HEAD
#   PROFILE=1                             # write the server's CPU profile to $PROFILE_OUT
set -u
SCALE=${SCALE:-1}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
W=$(mktemp -d /tmp/kelp-bench-compare.XXXXXX)
PIDS=()
cleanup() {
  for p in "${PIDS[@]:-}"; do [ -n "$p" ] && kill "$p" 2>/dev/null; done
  for p in "${PIDS[@]:-}"; do [ -n "$p" ] && wait "$p" 2>/dev/null; done
  [ -n "${KEEP:-}" ] || rm -rf "$W"
}
trap cleanup EXIT
die() { echo "bench-compare: $*" >&2; exit 1; }
KELP=${KELP_BIN:-$W/kelp}
[ -n "${KELP_BIN:-}" ] || (cd "$ROOT" && go build -o "$KELP" ./cmd/kelp) || die "go build failed"
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'; }
MP=$(port); VP=$(port); FP=$(port); SP=$(port)
export KELP_ACCESS_KEY=benchcompare KELP_SECRET_KEY=benchcompare-secret
prof=()
[ -n "${PROFILE:-}" ] && prof=(--cpuprofile="${PROFILE_OUT:-/tmp/kelp-bench-compare.pprof}")
"$KELP" "${prof[@]}" server --dir="$W/data" --ip=127.0.0.1 --master.port="$MP" --volume.port="$VP" --filer.port="$FP" \
  --s3.port="$SP" --webdav.port=0 >"$W/server.log" 2>&1 &
SERVER_PID=$!
PIDS+=($SERVER_PID)
for i in $(seq 1 300); do
  c=$(curl -s -o /dev/null -w '%{http_code}' -X PUT --data-binary x "http://127.0.0.1:$FP/.probe" 2>/dev/null)
  [ "${c:0:1}" = 2 ] && break; sleep 0.2
done
[ "${c:0:1}" = 2 ] || die "the server did not become writable: $(tail -3 "$W/server.log")"
curl -s -o /dev/null -X DELETE "http://127.0.0.1:$FP/.probe"
echo "bench-compare: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg) at start, scale $SCALE"
"$KELP" benchmark suite --master=127.0.0.1:"$MP" --filer=127.0.0.1:"$FP" --s3=http://127.0.0.1:"$SP" \
  --dir="$W/data" --scale="$SCALE"
rc=$?
echo "bench-compare: load average $(cut -d' ' -f1-3 /proc/loadavg) at end"
if [ -n "${PROFILE:-}" ]; then kill -INT "$SERVER_PID"; wait "$SERVER_PID"; fi
exit $rc
