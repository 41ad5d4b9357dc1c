#!/usr/bin/env bash
# test-deps.sh — install and start what Kelp's tests need, on a Debian 12 machine.
#
# Idempotent and fast when everything is present: packages are installed only
# when their command is missing (apt-get update runs only then): postgresql,
# redis, fuse3, attr, cadaver, litmus, rclone, s3cmd, curl, awscli, prometheus (promtool), python3-boto3, chromium, docker.io (only
# without any docker) and docker-compose (only without `docker compose`). The test
# PostgreSQL / Redis servers are started only when nothing answers on their
# ports. It never stops or kills anything: servers it started keep running for
# later test runs; stop them by hand with the commands it prints.
#
# Servers (loopback only, throw-away data under /tmp):
#   PostgreSQL  127.0.0.1:54329  database kelptest, user postgres, trust auth
#   Redis       127.0.0.1:63799  no persistence
# The tests' built-in defaults match these, so `go test ./...` works after one
# run; the exported variables below override them.
set -euo pipefail

PG_PORT=${KELP_TEST_PG_PORT:-54329}
PG_DIR=${KELP_TEST_PG_DIR:-/tmp/kelp-test-pg}
PG_DB=kelptest
REDIS_PORT=${KELP_TEST_REDIS_PORT:-63799}
REDIS_DIR=${KELP_TEST_REDIS_DIR:-/tmp/kelp-test-redis}

log() { echo "test-deps: $*" >&2; }
die() { log "$*"; exit 1; }

# pg_bin NAME prints the path of a PostgreSQL server program (initdb, pg_ctl),
# which Debian keeps under /usr/lib/postgresql/<version>/bin, off PATH.
pg_bin() {
	local p
	p=$(command -v "$1" 2>/dev/null || true)
	if [ -z "$p" ]; then
		p=$(ls -d /usr/lib/postgresql/*/bin/"$1" 2>/dev/null | sort -V | tail -n 1 || true)
	fi
	[ -n "$p" ] && echo "$p"
}

# --- packages ---------------------------------------------------------------
missing=()
[ -n "$(pg_bin initdb)" ] && [ -n "$(pg_bin pg_ctl)" ] || missing+=(postgresql)
command -v psql >/dev/null || missing+=(postgresql-client)
command -v redis-server >/dev/null || missing+=(redis-server)
command -v redis-cli >/dev/null || missing+=(redis-tools)
command -v fusermount3 >/dev/null || missing+=(fuse3)
command -v setfattr >/dev/null || missing+=(attr)   # xattrs through the FUSE mount
command -v cadaver >/dev/null || missing+=(cadaver) # a real WebDAV client
command -v litmus >/dev/null || missing+=(litmus)   # the WebDAV conformance suite
command -v rclone >/dev/null || missing+=(rclone)
command -v s3cmd >/dev/null || missing+=(s3cmd)
command -v curl >/dev/null || missing+=(curl)
command -v aws >/dev/null || missing+=(awscli)
command -v promtool >/dev/null || missing+=(prometheus) # promtool checks deploy/prometheus/rules.yml
# test/docker: a Docker engine and Compose. The engine (docker.io) is only
# installed when there is no docker at all; `docker compose` (v2) or
# docker-compose (v1) both do.
command -v docker >/dev/null || missing+=(docker.io)
docker compose version >/dev/null 2>&1 || command -v docker-compose >/dev/null || missing+=(docker-compose)
# test/blackbox runs boto3 with the python3 on PATH. Debian's python3-boto3
# serves /usr/bin/python3; another python3 first on PATH (pyenv, a venv) must
# bring its own boto3 (checked at the end: pip needs the network).
/usr/bin/python3 -c 'import boto3' >/dev/null 2>&1 || missing+=(python3-boto3)
# internal/adminui's browser tests drive a headless Chromium (chromedp).
command -v chromium >/dev/null || missing+=(chromium)

if [ ${#missing[@]} -gt 0 ]; then
	[ "$(id -u)" -eq 0 ] || die "missing ${missing[*]}; run as root to install them"
	log "installing ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -q >/dev/null
	apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null
fi

# --- PostgreSQL ---------------------------------------------------------------
# as_pg runs a command as the owner of the test cluster: the postgres system
# user when we are root (the server refuses to run as root), else ourselves.
as_pg() {
	if [ "$(id -u)" -eq 0 ]; then
		runuser -u postgres -- "$@"
	else
		"$@"
	fi
}

pg_ready() {
	psql -h 127.0.0.1 -p "$PG_PORT" -U postgres -d postgres -Atqc 'select 1' >/dev/null 2>&1
}

if ! pg_ready; then
	initdb=$(pg_bin initdb) || die "initdb not found"
	pg_ctl=$(pg_bin pg_ctl) || die "pg_ctl not found"
	mkdir -p "$PG_DIR"
	[ "$(id -u)" -eq 0 ] && chown postgres: "$PG_DIR"
	if [ ! -f "$PG_DIR/data/PG_VERSION" ]; then
		log "creating PostgreSQL cluster in $PG_DIR/data"
		as_pg "$initdb" -D "$PG_DIR/data" -U postgres --auth=trust -E UTF8 >"$PG_DIR/initdb.log" 2>&1 ||
			die "initdb failed, see $PG_DIR/initdb.log"
	fi
	# A machine restart (or a CI run after a session's processes were
	# ended) leaves lock files behind; PostgreSQL refuses to start if their
	# pid now belongs to another process. Remove them only when that pid is
	# not a running postgres.
	for lock in "$PG_DIR/data/postmaster.pid" "$PG_DIR/.s.PGSQL.$PG_PORT.lock"; do
		[ -f "$lock" ] || continue
		pid=$(head -n 1 "$lock")
		if [ "$(cat "/proc/$pid/comm" 2>/dev/null)" != postgres ]; then
			log "removing stale $lock (pid $pid is not a postgres)"
			rm -f "$lock"
		fi
	done
	log "starting PostgreSQL on 127.0.0.1:$PG_PORT"
	# Test data is throw-away: skip fsync to keep the tests fast; keep
	# shared memory small since the machine is shared.
	as_pg "$pg_ctl" -D "$PG_DIR/data" -l "$PG_DIR/server.log" -w -t 60 start -o \
		"-p $PG_PORT -c listen_addresses=127.0.0.1 -k $PG_DIR -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c shared_buffers=32MB -c max_connections=200" \
		>/dev/null || die "PostgreSQL did not start, see $PG_DIR/server.log"
	pg_ready || die "PostgreSQL started but does not answer on 127.0.0.1:$PG_PORT"
fi
if [ "$(psql -h 127.0.0.1 -p "$PG_PORT" -U postgres -d postgres -Atqc "select 1 from pg_database where datname='$PG_DB'")" != 1 ]; then
	psql -h 127.0.0.1 -p "$PG_PORT" -U postgres -d postgres -qc "create database $PG_DB" >/dev/null
fi

# --- Redis --------------------------------------------------------------------
redis_ready() { [ "$(redis-cli -h 127.0.0.1 -p "$REDIS_PORT" ping 2>/dev/null)" = PONG ]; }

if ! redis_ready; then
	log "starting Redis on 127.0.0.1:$REDIS_PORT"
	mkdir -p "$REDIS_DIR"
	redis-server --bind 127.0.0.1 --port "$REDIS_PORT" --daemonize yes --save '' --appendonly no \
		--dir "$REDIS_DIR" --pidfile "$REDIS_DIR/redis.pid" --logfile "$REDIS_DIR/redis.log" >/dev/null
	for _ in $(seq 50); do redis_ready && break; sleep 0.1; done
	redis_ready || die "Redis did not start, see $REDIS_DIR/redis.log"
fi

# --- the python the tests run ---------------------------------------------------
if ! python3 -c 'import boto3' >/dev/null 2>&1; then
	py=$(command -v python3 || echo python3)
	die "$py cannot import boto3; python3-boto3 serves /usr/bin/python3: put /usr/bin ahead of $(dirname "$py") on PATH, or install boto3 into $py"
fi

# --- what the tests read --------------------------------------------------------
cat <<EOT
export KELP_TEST_POSTGRES_DSN='postgres://postgres@127.0.0.1:$PG_PORT/$PG_DB?sslmode=disable'
export KELP_TEST_REDIS_URL='redis://127.0.0.1:$REDIS_PORT/0'
# stop: runuser -u postgres -- $(pg_bin pg_ctl || echo pg_ctl) -D $PG_DIR/data stop; redis-cli -p $REDIS_PORT shutdown nosave
EOT
