#!/usr/bin/env python3
"""bench-secure-ab.py: A/B runs of `kelp benchmark` against several `kelp server`s.

Starts one `kelp server` per argument NAME=BINARY[:FLAGS] (FLAGS containing
--secure: the client gets the generated security.toml and speaks TLS), then
runs the benchmark against each in turn, round after round (interleaved:
a b c a b c ...), and prints per run the throughput and the CPU time per
operation of the server (utime+stime from /proc/PID/stat) and of the
benchmark client (its own rusage), for each phase. See docs/benchmark.md
(Security on and off).

  scripts/bench-secure-ab.py plain=bin/kelp: secure=bin/kelp:"--secure --filer.encrypt-data"
  scripts/bench-secure-ab.py plain=bin/kelp: sse=bin/kelp:bench:--sse=AES256   # SSE-S3 against plain
  scripts/bench-secure-ab.py plainB=/tmp/old/kelp: secureB=/tmp/old/kelp:"--secure --filer.encrypt-data" \\
                             plainA=bin/kelp: secureA=bin/kelp:"--secure --filer.encrypt-data"

Environment: ROUNDS (3); MODE=s3 (1 MiB S3 PUT then GET: COUNT 300, CONC 8,
SIZE 1MiB) or MODE=small (`kelp benchmark` 1 KiB writes then reads: N 20000,
CONC 16); PROFILE=1 writes each server's CPU profile to DIR/NAME/cpu.pprof;
KEEP=1 keeps the work directory (printed).
"""
import json
import os
import shutil
import socket
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

ROUNDS = int(os.environ.get("ROUNDS", "3"))
MODE = os.environ.get("MODE", "s3")
TCK = os.sysconf("SC_CLK_TCK")
AK, SK = "benchsecure", "benchsecure-secret-0123"


def port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def cpu(pid):
    f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / TCK


def load():
    return float(open("/proc/loadavg").read().split()[0])


def main():
    if len(sys.argv) < 2 or any("=" not in a for a in sys.argv[1:]):
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    env = dict(os.environ, KELP_ACCESS_KEY=AK, KELP_SECRET_KEY=SK)
    work = tempfile.mkdtemp(prefix="kelp-bench-ab.")
    servers = []
    try:
        for arg in sys.argv[1:]:
            name, rest = arg.split("=", 1)
            binary, _, flags = rest.partition(":")
            d = os.path.join(work, name)
            os.makedirs(d)
            # Flags written bench:FLAG go to this server's benchmark client
            # (bench:--sse=AES256: every object SSE-S3), the rest to the server.
            words = flags.split()
            bench = [w[len("bench:"):] for w in words if w.startswith("bench:")]
            flags = " ".join(w for w in words if not w.startswith("bench:"))
            s = dict(name=name, bin=binary, secure="--secure" in flags, dir=d, s3=port(), master=port(), res=[], bench=bench)
            prof = [f"--cpuprofile={d}/cpu.pprof"] if os.environ.get("PROFILE") else []
            cmd = [binary] + prof + ["server", f"--dir={d}/data", "--ip=127.0.0.1", f"--master.port={s['master']}",
                                     f"--volume.port={port()}", f"--filer.port={port()}", f"--s3.port={s['s3']}",
                                     "--webdav.port=0", f"--s3.access-key={AK}", f"--s3.secret-key={SK}"] + flags.split()
            s["p"] = subprocess.Popen(cmd, stdout=open(f"{d}/log", "w"), stderr=subprocess.STDOUT, env=env)
            servers.append(s)
        for s in servers:
            wait_up(s)
        print(f"bench-secure-ab: {os.cpu_count()} cores, load average {' '.join(open('/proc/loadavg').read().split()[:3])}, "
              f"mode {MODE}, {ROUNDS} rounds; work directory {work}", flush=True)
        for r in range(1, ROUNDS + 1):
            for s in servers:
                run(s, r, env)
        print("medians:")
        for s in servers:
            if s["res"]:
                show(s["name"], "", {k: statistics.median(x[k] for x in s["res"]) for k in s["res"][0]})
    finally:
        for s in servers:
            s["p"].terminate()
        for s in servers:
            s["p"].wait()
        if not os.environ.get("KEEP"):
            shutil.rmtree(work, ignore_errors=True)


def wait_up(s):
    for _ in range(300):
        try:
            if s["secure"]:
                ca = f"{s['dir']}/data/security/ca.crt"
                if not os.path.exists(ca):
                    raise OSError("no CA yet")
                urllib.request.urlopen(f"https://127.0.0.1:{s['s3']}/", context=ssl.create_default_context(cafile=ca), timeout=2)
            else:
                urllib.request.urlopen(f"http://127.0.0.1:{s['s3']}/", timeout=2)
            return
        except urllib.error.HTTPError:
            return  # it answers
        except OSError:
            time.sleep(0.2)
    sys.exit(f"bench-secure-ab: {s['name']} did not come up; see {s['dir']}/log")


def run(s, r, env):
    sec = [f"--security.config={s['dir']}/data/security/security.toml"] if s["secure"] else []
    if MODE == "small":
        n = int(os.environ.get("N", "20000"))
        cmd = [s["bin"]] + sec + ["benchmark", f"--master=127.0.0.1:{s['master']}", f"--n={n}", "--size=1024",
                                  f"--concurrency={os.environ.get('CONC', '16')}", "--json"] + s["bench"]
        first, ops = "write:", n
    else:
        n = int(os.environ.get("COUNT", "300"))
        scheme = "https" if s["secure"] else "http"
        cmd = [s["bin"]] + sec + ["benchmark", "s3", f"--endpoint={scheme}://127.0.0.1:{s['s3']}",
                                  f"--size={os.environ.get('SIZE', '1MiB')}", f"--count={n}",
                                  f"--concurrency={os.environ.get('CONC', '8')}", f"--prefix=r{r}", f"--seed={r}", "--json"] + s["bench"]
        first, ops = "put:", n
    pid = s["p"].pid
    c0 = cpu(pid)
    cp = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, text=True)
    cm = ccm = None
    lines = []
    for line in cp.stdout:
        if cm is None and line.startswith(first):  # the first phase's report: the second starts
            cm, ccm = cpu(pid), cpu(cp.pid)
        lines.append(line)
    _, status, ru = os.wait4(cp.pid, 0)
    c1, cc1 = cpu(pid), ru.ru_utime + ru.ru_stime
    try:
        j = json.loads(lines[-1])
    except (IndexError, ValueError):
        print(f"{s['name']} round {r}: no result (exit {status}):\n" + "".join(lines[-20:]), flush=True)
        return
    if cm is None:
        cm, ccm = c1, cc1
    if MODE == "small":
        row = {"writes/s": j["write"]["requests_per_sec"], "reads/s": j["read"]["requests_per_sec"],
               "srv us/write": (cm - c0) * 1e6 / ops, "cli us/write": ccm * 1e6 / ops,
               "srv us/read": (c1 - cm) * 1e6 / ops, "cli us/read": (cc1 - ccm) * 1e6 / ops}
    else:
        row = {"PUT MB/s": j["put"]["mb_per_sec"], "GET MB/s": j["get"]["mb_per_sec"],
               "srv ms/PUT": (cm - c0) * 1e3 / ops, "cli ms/PUT": ccm * 1e3 / ops,
               "srv ms/GET": (c1 - cm) * 1e3 / ops, "cli ms/GET": (cc1 - ccm) * 1e3 / ops}
    row["load"] = load()
    s["res"].append(row)
    show(s["name"], r, row)


def show(name, r, row):
    print(f"{name:<10} {r!s:>2}  " + "  ".join(f"{k} {v:.2f}" if v < 100 else f"{k} {v:.0f}" for k, v in row.items()), flush=True)


if __name__ == "__main__":
    main()
