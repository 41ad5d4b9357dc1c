#!/usr/bin/env bash
# bench-secure.sh: 1 MiB S3 PUT and GET against a plain `kelp server` and a
# `kelp server --secure --filer.encrypt-data` (TLS on every port, mTLS between
# the parts, signed file ids, access tokens, encryption at rest), both running
# side by side, runs interleaved plain, secure, plain, secure, ... (see
# docs/benchmark.md#security-on-and-off). Prints, per run, the throughput and
# the servers' CPU time per object (utime+stime from /proc/PID/stat around the
# run, PUT and GET together, and the GET phase alone): the steadier figure on
# a shared machine.
#
#   scripts/bench-secure.sh                 # 3 rounds of 200 objects
#   ROUNDS=5 COUNT=400 scripts/bench-secure.sh
#   KELP_BIN=/path/to/kelp                  # a built binary instead of building HEAD
#   PROFILE=DIR                             # write both servers' CPU profiles to DIR/{plain,secure}.pprof
#   SSE=1                                   # instead of a secure server: the plain one, every object
#                                           # SSE-S3 (--sse=AES256) in the second run of each round
set -u
ROUNDS=${ROUNDS:-3}
COUNT=${COUNT:-200}
CONC=${CONC:-8}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
W=$(mktemp -d /tmp/kelp-bench-secure.XXXXXX)
PIDS=()
cleanup() {
  for p in "${PIDS[@]:-}"; do [ -n "$p" ] && kill "$p" 2>/dev/null; done
  for p in "${PIDS[@]:-}"; do [ -n "$p" ] && wait "$p" 2>/dev/null; done
  [ -n "${KEEP:-}" ] || rm -rf "$W"
}
trap cleanup EXIT
die() { echo "bench-secure: $*" >&2; exit 1; }
KELP=${KELP_BIN:-$W/kelp}
[ -n "${KELP_BIN:-}" ] || (cd "$ROOT" && go build -o "$KELP" ./cmd/kelp) || die "go build failed"
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'; }
export KELP_ACCESS_KEY=benchsecure KELP_SECRET_KEY=benchsecure-secret-0123
declare -A SPORT PID
start() { # name extra-flags...
  local name=$1; shift
  local mp vp fp sp prof=()
  mp=$(port); vp=$(port); fp=$(port); sp=$(port)
  [ -n "${PROFILE:-}" ] && mkdir -p "$PROFILE" && prof=(--cpuprofile="$PROFILE/$name.pprof")
  "$KELP" "${prof[@]}" server --dir="$W/$name" --ip=127.0.0.1 --master.port="$mp" --volume.port="$vp" --filer.port="$fp" \
    --s3.port="$sp" --webdav.port=0 --s3.access-key="$KELP_ACCESS_KEY" --s3.secret-key="$KELP_SECRET_KEY" "$@" >"$W/$name.log" 2>&1 &
  PID[$name]=$!; PIDS+=($!); SPORT[$name]=$sp
}
SECOND=secure
start plain
if [ -n "${SSE:-}" ]; then
  SECOND=sse PID[sse]=${PID[plain]} SPORT[sse]=${SPORT[plain]}
else
  start secure --secure --filer.encrypt-data
fi
for name in plain $SECOND; do
  scheme=http; ca=(); [ $name = secure ] && scheme=https
  for i in $(seq 1 300); do
    [ $name = secure ] && [ -f "$W/secure/security/ca.crt" ] && ca=(--cacert "$W/secure/security/ca.crt")
    c=$(curl -s "${ca[@]}" -o /dev/null -w '%{http_code}' "$scheme://127.0.0.1:${SPORT[$name]}/" 2>/dev/null)
    [ "${c:0:1}" = 4 ] || [ "${c:0:1}" = 2 ] && break; sleep 0.2
  done
done
cpu() { awk '{print $14+$15}' "/proc/$1/stat"; }
tck=$(getconf CLK_TCK)
echo "bench-secure: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg), $ROUNDS rounds of $COUNT x 1 MiB, concurrency $CONC"
printf '%-7s %5s %10s %10s %16s %12s  %s\n' server round "PUT MB/s" "GET MB/s" "CPU ms/object" "CPU ms/GET" "load"
for r in $(seq 1 "$ROUNDS"); do
  for name in plain $SECOND; do
    sec=(); scheme=http
    [ $name = secure ] && sec=(--security.config="$W/secure/security/security.toml") && scheme=https
    opt=(); [ $name = sse ] && opt=(--sse=AES256)
    c0=$(cpu "${PID[$name]}")
    cm=$c0 out=""
    # The CPU time is read again when the PUT phase's line comes out (the
    # GET phase starts right after it): the GETs' own share.
    while IFS= read -r line; do
      case "$line" in put:*) cm=$(cpu "${PID[$name]}") ;; esac
      out=$line
    done < <("$KELP" "${sec[@]}" benchmark s3 --endpoint="$scheme://127.0.0.1:${SPORT[$name]}" --size=1MiB --count="$COUNT" \
      --concurrency="$CONC" --prefix="r$r" --seed=$r --json "${opt[@]}" 2>&1)
    c1=$(cpu "${PID[$name]}")
    put=$(echo "$out" | python3 -c 'import json,sys; print("%.1f" % json.load(sys.stdin)["put"]["mb_per_sec"])' 2>/dev/null || echo "?")
    get=$(echo "$out" | python3 -c 'import json,sys; print("%.1f" % json.load(sys.stdin)["get"]["mb_per_sec"])' 2>/dev/null || echo "?")
    ms=$(python3 -c "print('%.2f' % (($c1-$c0)*1000/$tck/(2*$COUNT)))")
    gms=$(python3 -c "print('%.2f' % (($c1-$cm)*1000/$tck/$COUNT))")
    printf '%-7s %5s %10s %10s %16s %12s  %s\n' $name "$r" "$put" "$get" "$ms" "$gms" "$(cut -d' ' -f1 /proc/loadavg)"
    if [ "$put" = "?" ]; then echo "  $out"; fi
  done
done
