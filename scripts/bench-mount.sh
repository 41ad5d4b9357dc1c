#!/usr/bin/env bash
# bench-mount.sh: the speed targets of the FUSE mount (issue 10), each measured on the mount and on a
# local directory in the same run, printed as ratios. Starts its own `kelp server` and `kelp mount` in a
# temporary directory and removes them at the end. Needs root (drop_caches), /dev/fuse and fusermount3.
#
#   scripts/bench-mount.sh                 # the full targets: 1024 x 1 MiB, 1 GiB dd, 10,000 x 4 KiB, ls -l
#   N1M=256 BIGMB=256 NSMALL=2000 scripts/bench-mount.sh     # a quicker run
#   PROFILE=1 scripts/bench-mount.sh       # also writes the mount's CPU profile to $PROFILE_OUT
#                                          # (default /tmp/kelp-mount.pprof; go tool pprof)
#   MOUNT_ARGS="--cache.dir=/tmp/c --cache.size=2048" scripts/bench-mount.sh
#   KELP_BIN=/path/to/kelp                 # use a built binary instead of building HEAD
set -u
N1M=${N1M:-1024}        # files of 1 MiB
BIGMB=${BIGMB:-1024}    # size of the one big file, MiB
NSMALL=${NSMALL:-10000} # files of 4 KiB, extracted from a tar
MOUNT_ARGS=${MOUNT_ARGS:-}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
W=$(mktemp -d /tmp/kelp-bench-mount.XXXXXX)
PIDS=()
cleanup() {
  mountpoint -q "$W/m" 2>/dev/null && { fusermount3 -u "$W/m" 2>/dev/null || fusermount3 -u -z "$W/m"; }
  for p in "${PIDS[@]:-}"; do [ -n "$p" ] && kill "$p" 2>/dev/null; done
  for p in "${PIDS[@]:-}"; do [ -n "$p" ] && wait "$p" 2>/dev/null; done
  [ -n "${KEEP:-}" ] || rm -rf "$W"
}
trap cleanup EXIT
die() { echo "bench-mount: $*" >&2; exit 1; }
[ -e /dev/fuse ] || die "no /dev/fuse"
KELP=${KELP_BIN:-$W/kelp}
[ -n "${KELP_BIN:-}" ] || (cd "$ROOT" && go build -o "$KELP" ./cmd/kelp) || die "go build failed"
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'; }
MP=$(port); VP=$(port); FP=$(port); SP=$(port)
"$KELP" server --dir="$W/data" --ip=127.0.0.1 --master.port="$MP" --volume.port="$VP" --filer.port="$FP" \
  --s3.port="$SP" --webdav.port=0 >"$W/server.log" 2>&1 &
SERVER_PID=$!
PIDS+=($SERVER_PID)
for i in $(seq 1 300); do
  c=$(curl -s -o /dev/null -w '%{http_code}' -X PUT --data-binary x "http://127.0.0.1:$FP/.probe" 2>/dev/null)
  [ "${c:0:1}" = 2 ] && break; sleep 0.2
done
[ "${c:0:1}" = 2 ] || die "the server did not become writable: $(tail -3 "$W/server.log")"
curl -s -o /dev/null -X DELETE "http://127.0.0.1:$FP/.probe"
mkdir -p "$W/m" "$W/local" "$W/src1m"
prof=()
[ -n "${PROFILE:-}" ] && prof=(--cpuprofile="${PROFILE_OUT:-/tmp/kelp-mount.pprof}")
"$KELP" "${prof[@]}" mount --filer=127.0.0.1:"$FP" --dir="$W/m" $MOUNT_ARGS >"$W/mount.log" 2>&1 &
MOUNT_PID=$!
PIDS+=($MOUNT_PID)
for i in $(seq 1 100); do mountpoint -q "$W/m" && break; sleep 0.1; done
mountpoint -q "$W/m" || die "not mounted: $(tail -3 "$W/mount.log")"

now() { date +%s.%N; }
# t CMD...: seconds CMD took.
t() { local t0; t0=$(now); "$@" || die "failed: $*"; python3 -c "print($(now)-$t0)"; }
drop() { sync; echo 3 >/proc/sys/vm/drop_caches 2>/dev/null; }
# fsyncdir DIR: sync(1) does not wait for the mount's background commits (no SYNCFS in the FUSE
# library); an fsync of the directory does, on the mount and (for its entries) on a local disk.
fsyncdir() { python3 -c 'import os,sys; fd=os.open(sys.argv[1], os.O_RDONLY); os.fsync(fd)' "$1"; }

# sources, made before any timing
for i in $(seq 1 "$N1M"); do head -c 1048576 /dev/urandom >"$W/src1m/$i"; done
mkdir -p "$W/tarsrc/small"
python3 - "$W/tarsrc/small" "$NSMALL" <<'PY'
import os, sys
d, n = sys.argv[1], int(sys.argv[2])
for i in range(n):
    with open(os.path.join(d, "f%05d" % i), "wb") as f: f.write(os.urandom(4096))
PY
tar -C "$W/tarsrc" -cf "$W/small.tar" small
rm -rf "$W/tarsrc"
drop

declare -A R C
# ticks PID: CPU time (user + system) of process PID so far, in clock ticks.
ticks() { awk '{print $14+$15}' "/proc/$1/stat"; }
# step NAME KEY CMD...: R[NAME.KEY] = seconds CMD took; for the mount, C[KEY] = the CPU seconds the
# mount and the server spent meanwhile (CPU per operation is steadier than wall time on a busy machine).
step() {
  local name=$1 key=$2; shift 2
  local m0 s0
  m0=$(ticks "$MOUNT_PID"); s0=$(ticks "$SERVER_PID")
  R[$name.$key]=$(t "$@")
  [ "$name" = mount ] && C[$key]="$(( $(ticks "$MOUNT_PID") - m0 )) $(( $(ticks "$SERVER_PID") - s0 ))"
}
run() { # run NAME DIR: all workloads into DIR
  local name=$1 d=$2
  mkdir -p "$d/1m" "$d/tar"
  step "$name" w1m sh -c "cp -r '$W/src1m/.' '$d/1m/' && sync && $(declare -f fsyncdir); fsyncdir '$d/1m'"
  drop
  step "$name" r1m sh -c "cat '$d/1m/'* >/dev/null"
  step "$name" wbig dd if=/dev/zero of="$d/big" bs=1M count="$BIGMB" conv=fsync status=none
  drop
  step "$name" rbig dd if="$d/big" of=/dev/null bs=1M status=none
  rm -f "$d/big"
  step "$name" untar sh -c "tar -C '$d/tar' -xf '$W/small.tar' && sync && $(declare -f fsyncdir); fsyncdir '$d/tar/small'"
  drop
  step "$name" ls sh -c "ls -l '$d/tar/small' >/dev/null"
  [ "$(ls "$d/tar/small" | wc -l)" = "$NSMALL" ] || die "$name: ls shows $(ls "$d/tar/small" | wc -l) files, want $NSMALL"
}
run local "$W/local"
run mount "$W/m"
diff -r "$W/src1m" "$W/m/1m" >/dev/null || die "the 1 MiB files read back through the mount differ"
python3 - <<PY
l = dict(w1m=${R[local.w1m]}, r1m=${R[local.r1m]}, wbig=${R[local.wbig]}, rbig=${R[local.rbig]}, untar=${R[local.untar]}, ls=${R[local.ls]})
m = dict(w1m=${R[mount.w1m]}, r1m=${R[mount.r1m]}, wbig=${R[mount.wbig]}, rbig=${R[mount.rbig]}, untar=${R[mount.untar]}, ls=${R[mount.ls]})
n1, big, ns = $N1M, $BIGMB, $NSMALL
def mbs(mb, s): return mb / s
print("workload                         local          mount          ratio  target")
print("%-28s %8.1f MB/s %8.1f MB/s %6.2fx  >= 0.5x" % ("write %d x 1 MiB (cp, fsync)" % n1, mbs(n1, l['w1m']), mbs(n1, m['w1m']), l['w1m']/m['w1m']))
print("%-28s %8.1f MB/s %8.1f MB/s %6.2fx  >= 0.5x" % ("read  %d x 1 MiB (cat)" % n1, mbs(n1, l['r1m']), mbs(n1, m['r1m']), l['r1m']/m['r1m']))
print("%-28s %8.1f MB/s %8.1f MB/s %6.2fx  >= 0.6x" % ("write %d MiB dd fsync" % big, mbs(big, l['wbig']), mbs(big, m['wbig']), l['wbig']/m['wbig']))
print("%-28s %8.1f MB/s %8.1f MB/s %6.2fx  >= 0.8x" % ("read  %d MiB dd" % big, mbs(big, l['rbig']), mbs(big, m['rbig']), l['rbig']/m['rbig']))
print("%-28s %8.0f f/s   %8.0f f/s   %6.2fx  >= 1000 f/s" % ("untar %d x 4 KiB, fsync" % ns, ns/l['untar'], ns/m['untar'], l['untar']/m['untar']))
print("%-28s %8.3f s      %8.3f s      %6.2fx  < 1 s" % ("ls -l of %d entries (cold)" % ns, l['ls'], m['ls'], l['ls']/m['ls']))
hz = $(getconf CLK_TCK)
cpu = dict(w1m="${C[w1m]}", r1m="${C[r1m]}", wbig="${C[wbig]}", rbig="${C[rbig]}", untar="${C[untar]}", ls="${C[ls]}")
per = dict(w1m=(n1, "ms/MiB"), r1m=(n1, "ms/MiB"), wbig=(big, "ms/MiB"), rbig=(big, "ms/MiB"), untar=(ns, "ms/file"), ls=(ns, "ms/entry"))
print("CPU of the mount run (clock ticks of %d/s): mount + server, per unit" % hz)
for k in ("w1m", "r1m", "wbig", "rbig", "untar", "ls"):
    mt, st = (int(x) for x in cpu[k].split())
    n, unit = per[k]
    print("  %-6s mount %6.2f s  server %6.2f s   %.3f + %.3f %s" % (k, mt/hz, st/hz, 1000*mt/hz/n, 1000*st/hz/n, unit))
PY
if [ -n "${PROFILE:-}" ]; then
  fusermount3 -u "$W/m"; wait "$MOUNT_PID"
  echo "CPU profile of the mount: ${PROFILE_OUT:-/tmp/kelp-mount.pprof} (go tool pprof KELP_BINARY PROFILE)"
fi
