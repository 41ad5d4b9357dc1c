#!/usr/bin/env bash
# bench-ec-degraded.sh: the cold-read targets of erasure coding (issue 11), measured the same way every
# run. Each run starts its own cluster in a temporary directory (kelp master with 16 MiB volumes, 4 kelp
# volume processes in 2 racks), writes N files of 1 KiB into collection "ec" with `kelp benchmark --save`,
# then reads every file once in random order, page cache dropped before each pass (`--cold`):
#   1. before encoding (two passes, the better kept);  2. after `ec.encode` (10+4; two passes, the
#   better kept, both printed);  3. after kill -9 of one of the 4 volume servers.
# It prints each run's ratios (pass 2 / pass 1, pass 3 / pass 1) and the median over RUNS runs, with
# the load average. Needs root (drop_caches).
#
#   scripts/bench-ec-degraded.sh              # 3 runs of 20,000 files
#   RUNS=5 N=10000 scripts/bench-ec-degraded.sh
#   KELP_BIN=/path/to/kelp scripts/bench-ec-degraded.sh   # a built binary instead of building HEAD
#   KEEP=1 ...                                # keep the temporary directories (logs)
set -u
RUNS=${RUNS:-3}
N=${N:-20000}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
TOP=$(mktemp -d /tmp/kelp-bench-ec.XXXXXX)
PIDS=()
stop_all() {
  for p in "${PIDS[@]:-}"; do [ -n "$p" ] && kill "$p" 2>/dev/null; done
  for p in "${PIDS[@]:-}"; do [ -n "$p" ] && wait "$p" 2>/dev/null; done
  PIDS=()
}
cleanup() { stop_all; [ -n "${KEEP:-}" ] || rm -rf "$TOP"; }
trap cleanup EXIT
die() { echo "bench-ec-degraded: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || die "needs root (drop_caches)"
KELP=${KELP_BIN:-$TOP/kelp}
[ -n "${KELP_BIN:-}" ] || (cd "$ROOT" && go build -o "$KELP" ./cmd/kelp) || die "go build failed"
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'; }
wait_ok() { for _ in $(seq 1 300); do curl -sf -o /dev/null "$1" && return 0; sleep 0.2; done; return 1; }
rps() { python3 -c 'import json,sys; r=json.loads(sys.stdin.read().strip().splitlines()[-1])["read"]
if r["failed"]: sys.exit("%d reads failed" % r["failed"])
print("%.0f" % r["requests_per_sec"])'; }

one_run() { # $1: run number; prints "plain ec degraded" (reads per second)
  local W="$TOP/run$1" MP vp VPIDS=() i
  mkdir -p "$W"
  MP=$(port)
  "$KELP" master --ip=127.0.0.1 --port="$MP" --mdir="$W/m" --volume-size-limit-mb=16 >"$W/master.log" 2>&1 &
  PIDS+=($!)
  wait_ok "http://127.0.0.1:$MP/healthz" || die "master did not start"
  for rack in r1 r1 r2 r2; do
    vp=$(port)
    "$KELP" volume --ip=127.0.0.1 --port="$vp" --dir="$W/v$vp" --max=40 --master=127.0.0.1:"$MP" \
      --data-center=dc1 --rack="$rack" >"$W/volume$vp.log" 2>&1 &
    PIDS+=($!); VPIDS+=($!)
    wait_ok "http://127.0.0.1:$vp/healthz" || die "volume server did not start"
  done
  # Every volume server heard by the master before writing, so volumes spread over all four.
  for _ in $(seq 1 100); do
    [ "$(curl -s "http://127.0.0.1:$MP/dir/status" | grep -o '"url"' | wc -l)" -ge 4 ] && break; sleep 0.2
  done
  local B=("$KELP" benchmark --master=127.0.0.1:"$MP" --collection=ec --size=1024 --json)
  "${B[@]}" --n="$N" --save="$W/files" >"$W/write.out" 2>"$W/write.err" || die "write failed: $(tail -3 "$W/write.err")"
  local plain p2 ec e2 degraded
  # Two passes before encoding, the better one kept: the first read pass of a fresh cluster is often
  # the slowest, and a low baseline would flatter the ratios.
  plain=$("${B[@]}" --reads-from="$W/files" --cold 2>"$W/r0.err" | rps) || die "reads before encoding: $plain"
  p2=$("${B[@]}" --reads-from="$W/files" --cold 2>"$W/r1.err" | rps) || die "reads before encoding: $p2"
  [ "$p2" -gt "$plain" ] && plain=$p2
  "$KELP" shell --master=127.0.0.1:"$MP" -c "lock; ec.encode -collection=ec -fullPercent=0 -quietFor=0s -force; unlock" \
    >"$W/encode.out" 2>&1 || die "ec.encode failed: $(tail -3 "$W/encode.out")"
  ec=$("${B[@]}" --reads-from="$W/files" --cold 2>"$W/r2.err" | rps) || die "reads after encoding: $ec"
  e2=$("${B[@]}" --reads-from="$W/files" --cold 2>"$W/r2b.err" | rps) || die "reads after encoding: $e2"
  echo "run $1: EC healthy passes $ec, $e2" >&2
  [ "$e2" -gt "$ec" ] && ec=$e2
  kill -9 "${VPIDS[0]}"
  wait "${VPIDS[0]}" 2>/dev/null
  degraded=$("${B[@]}" --reads-from="$W/files" --cold 2>"$W/r3.err" | rps) || die "degraded reads: $degraded"
  stop_all
  echo "$plain $ec $degraded"
}

results=()
for r in $(seq 1 "$RUNS"); do
  load=$(cut -d' ' -f1-3 /proc/loadavg)
  out=$(one_run "$r") || exit 1
  results+=("$out")
  set -- $out
  python3 -c "print('run %d: before %s, EC %s (%.2fx), 1 of 4 killed %s (%.2fx) reads/s; load %s' % ($r, $1, $2, $2/$1, $3, $3/$1, '$load'))"
done
printf '%s\n' "${results[@]}" | python3 -c '
import sys, statistics
rs = [list(map(float, l.split())) for l in sys.stdin if l.strip()]
print("median of %d runs: EC healthy %.2fx, degraded (1 of 4 killed) %.2fx of the cold reads before encoding" % (
    len(rs), statistics.median(e / p for p, e, d in rs), statistics.median(d / p for p, e, d in rs)))'
