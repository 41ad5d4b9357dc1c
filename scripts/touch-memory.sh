#!/usr/bin/env bash
# touch-memory.sh: write every free page of this machine's memory once, then free it. On a fresh
# virtual machine the host backs guest memory on first touch, so the first fills of the page cache
# (a volume server's writes, a cp's reads) run up to three times slower than later ones; benchmark
# figures are comparable only once the memory has been touched (see docs/mount.md, "Write-only
# descriptors past the page cache"). Leaves GiB_SPARE (default 2) GiB untouched.
set -eu
spare=${GIB_SPARE:-2}
avail_kb=$(awk '/^MemAvailable:/ {print $2}' /proc/meminfo)
gib=$(( avail_kb / 1048576 - spare ))
[ "$gib" -gt 0 ] || { echo "touch-memory: less than $spare GiB available, nothing to do"; exit 0; }
python3 - "$gib" <<'PY'
import mmap, sys, time
gib = int(sys.argv[1])
t0 = time.time()
block = b"\1" * (1 << 20)
held = []  # all held until the end: a GiB freed early would be handed out again, already touched
for _ in range(gib):
    m = mmap.mmap(-1, 1 << 30, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    for off in range(0, 1 << 30, 1 << 20):
        m[off:off + (1 << 20)] = block
    held.append(m)
for m in held:
    m.close()
print("touch-memory: wrote %d GiB in %.1f s" % (gib, time.time() - t0))
PY
