# Finds or starts the services Parley needs, installing them from Debian packages when absent.
# Sourced by ops/dev-up and ops/test; every function is idempotent.

PG_HOST=127.0.0.1
PG_PORT=5432
REDIS_PORT=6379
# The S3-compatible store for development and tests: s3s-fs, a directory served over the S3
# API (it checks signatures, so presigned-URL tests mean something).
S3_PORT=${S3_PORT:-9000}
S3_ACCESS_KEY=parley-dev
S3_SECRET_KEY=parley-dev-secret
S3S_FS_VERSION=0.14.1

log() { printf '\033[1m==> %s\033[0m\n' "$*" >&2; }

# `cargo install` of a tool the scripts run (cargo-deny, s3s-fs): release without
# LTO, at opt-level 1, in 16 units. A tool's own profile (cargo-deny's fat LTO) took four
# times as long to build on 2 cores, and these tools run for seconds (docs/benchmarks.md).
cargo_install_tool() {
  CARGO_PROFILE_RELEASE_LTO=false CARGO_PROFILE_RELEASE_CODEGEN_UNITS=16 \
    CARGO_PROFILE_RELEASE_OPT_LEVEL=1 CARGO_PROFILE_RELEASE_DEBUG=false \
    cargo install --locked "$@"
}

# With PARLEY_NO_PROMPT set (ops/test's background installs, which no one can answer), sudo
# fails at once rather than ask for a password; the step that needs the package asks later.
as_root() {
  if [ "$(id -u)" -eq 0 ]; then "$@"
  elif command -v sudo >/dev/null && [ -n "${PARLEY_NO_PROMPT:-}" ]; then sudo -n "$@"
  elif command -v sudo >/dev/null; then sudo "$@"
  else log "need root for: $*"; return 1; fi
}

apt_install() {
  log "installing $* from Debian packages"
  as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}

wait_for() { # wait_for <seconds> <command...>
  local n=$(( $1 * 5 )); shift
  for _ in $(seq "$n"); do "$@" >/dev/null 2>&1 && return 0; sleep 0.2; done
  return 1
}

ensure_postgres() {
  if ! command -v pg_isready >/dev/null || ! command -v pg_ctlcluster >/dev/null; then
    apt_install postgresql postgresql-client
  fi
  if ! pg_isready -q -h "$PG_HOST" -p "$PG_PORT"; then
    local version
    version=$(ls /etc/postgresql 2>/dev/null | sort -V | tail -n 1)
    if [ -z "$version" ]; then
      log "no Postgres cluster found"; return 1
    fi
    log "starting Postgres $version"
    as_root pg_ctlcluster --skip-systemctl-redirect "$version" main start
    wait_for 30 pg_isready -q -h "$PG_HOST" -p "$PG_PORT" || { log "Postgres did not start"; return 1; }
  fi
  # A password for the postgres user makes the URL work whether the server trusts local
  # connections (as CI's does) or asks for a password (as a fresh Debian install does).
  if ! psql "postgres://postgres:postgres@$PG_HOST:$PG_PORT/postgres" -Atqc 'SELECT 1' >/dev/null 2>&1; then
    log "setting the postgres user's password for local development"
    as_root su postgres -c "psql -qc \"ALTER USER postgres PASSWORD 'postgres'\"" >/dev/null
  fi
}

ensure_database() { # ensure_database <name>
  local admin="postgres://postgres:postgres@$PG_HOST:$PG_PORT/postgres"
  if [ "$(psql "$admin" -Atqc "SELECT 1 FROM pg_database WHERE datname = '$1'")" != 1 ]; then
    log "creating database $1"
    psql "$admin" -qc "CREATE DATABASE \"$1\"" >/dev/null
  fi
}

ensure_redis() {
  if ! command -v redis-server >/dev/null || ! command -v redis-cli >/dev/null; then
    apt_install redis-server redis-tools
  fi
  if ! redis-cli -h 127.0.0.1 -p "$REDIS_PORT" ping >/dev/null 2>&1; then
    log "starting Redis"
    as_root mkdir -p /var/lib/redis /var/log/redis
    as_root redis-server --daemonize yes --bind 127.0.0.1 --port "$REDIS_PORT" \
      --save "" --appendonly no --dir /var/lib/redis --logfile /var/log/redis/parley.log
    wait_for 10 redis-cli -h 127.0.0.1 -p "$REDIS_PORT" ping || { log "Redis did not start"; return 1; }
  fi
}

# s3s-fs runs detached, so it outlives the script that started it, as Postgres and Redis do.
ensure_s3() {
  if ! (echo > "/dev/tcp/127.0.0.1/$S3_PORT") 2>/dev/null; then
    if ! command -v s3s-fs >/dev/null || [ "$(s3s-fs --version 2>/dev/null)" != "s3s-fs $S3S_FS_VERSION" ]; then
      log "installing s3s-fs $S3S_FS_VERSION from crates.io (about two minutes, once)"
      cargo_install_tool s3s-fs --version "$S3S_FS_VERSION" --features binary --quiet
    fi
    local root=${PARLEY_S3_DIR:-${XDG_DATA_HOME:-$HOME/.local/share}/parley/s3}
    mkdir -p "$root"
    log "starting s3s-fs on 127.0.0.1:$S3_PORT (objects in $root)"
    # From /: s3s-fs resolves every path against its working directory, so one started from a
    # checkout later deleted (a git worktree) fails every request.
    (cd / && setsid s3s-fs --host 127.0.0.1 --port "$S3_PORT" --access-key "$S3_ACCESS_KEY" \
      --secret-key "$S3_SECRET_KEY" "$(realpath "$root")" >"$root.log" 2>&1 < /dev/null &)
    wait_for 20 bash -c "echo > /dev/tcp/127.0.0.1/$S3_PORT" || { log "s3s-fs did not start (see $root.log)"; return 1; }
  fi
}

# PgBouncer in transaction pooling mode on 127.0.0.1:$PGBOUNCER_PORT, in front of Postgres, for
# the tests that run the binaries through a pooler. sqlx prepares every statement, which a
# transaction pooler carries only from PgBouncer 1.21 on (max_prepared_statements). Debian 12
# packages 1.18, so when no pgbouncer of 1.21 or later is installed, one is built once from
# Debian 13's source package (its upstream tarball, checked against the SHA-256 Debian
# publishes) into $PGBOUNCER_HOME.
# Not 6432, where Debian's own pgbouncer service listens when that package is installed.
PGBOUNCER_PORT=${PGBOUNCER_PORT:-6442}
PGBOUNCER_VERSION=1.24.1
PGBOUNCER_SHA256=da72a3aba13072876d055a3e58dd4aba4a5de4ed6148e73033185245598fd3e0
PGBOUNCER_HOME=${PGBOUNCER_HOME:-${XDG_CACHE_HOME:-$HOME/.cache}/parley/pgbouncer-$PGBOUNCER_VERSION}
# The run directory: config, log and pid, one per user. Readable by the postgres user, whom
# pgbouncer runs as when started by root (it refuses to run as root).
PGBOUNCER_RUN=${PGBOUNCER_RUN:-/tmp/parley-pgbouncer-$(id -u)}

# Prints a pgbouncer binary of 1.21 or later, if one is installed or was built here.
pgbouncer_bin() {
  local bin version
  for bin in "$(command -v pgbouncer 2>/dev/null)" "$PGBOUNCER_HOME/bin/pgbouncer"; do
    [ -n "$bin" ] && [ -x "$bin" ] || continue
    version=$("$bin" --version 2>/dev/null | awk 'NR == 1 { print $2 }')
    if [ -n "$version" ] && [ "$(printf '1.21\n%s\n' "$version" | sort -V | head -n 1)" = 1.21 ]; then
      echo "$bin"; return 0
    fi
  done
  return 1
}

build_pgbouncer() {
  local missing=() pkg
  for pkg in libevent-dev libssl-dev pkg-config make gcc curl; do
    dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg")
  done
  [ ${#missing[@]} -eq 0 ] || apt_install "${missing[@]}"
  local src
  src=$(mktemp -d)
  log "building PgBouncer $PGBOUNCER_VERSION from Debian's source package (under a minute, once)"
  # Each step returns on failure: callers run this in a list, where `set -e` does not apply.
  curl -fsSL -o "$src/pgbouncer.tar.gz" \
    "http://deb.debian.org/debian/pool/main/p/pgbouncer/pgbouncer_$PGBOUNCER_VERSION.orig.tar.gz" || return 1
  echo "$PGBOUNCER_SHA256  $src/pgbouncer.tar.gz" | sha256sum -c --quiet - || {
    log "the PgBouncer source does not match its SHA-256"; rm -rf "$src"; return 1; }
  tar -xzf "$src/pgbouncer.tar.gz" -C "$src" || return 1
  (
    cd "$src/pgbouncer-$PGBOUNCER_VERSION"
    ./configure --prefix="$PGBOUNCER_HOME" --without-cares --without-pam --without-systemd \
      >/dev/null
    make -j"$(nproc)" >/dev/null
    make install >/dev/null
  ) || return 1
  rm -rf "$src"
}

ensure_pgbouncer() {
  ensure_postgres
  if pg_isready -q -h 127.0.0.1 -p "$PGBOUNCER_PORT"; then
    # Ours (or one like it) reaches Postgres' databases; anything else on the port is not.
    psql "postgres://postgres:postgres@127.0.0.1:$PGBOUNCER_PORT/postgres" -Atqc 'SELECT 1' >/dev/null 2>&1 || {
      log "127.0.0.1:$PGBOUNCER_PORT answers but does not reach Postgres: set PGBOUNCER_PORT to a free port"; return 1; }
    return 0
  fi
  local bin
  bin=$(pgbouncer_bin) || { build_pgbouncer && bin=$(pgbouncer_bin); } || {
    log "no PgBouncer of 1.21 or later"; return 1; }
  mkdir -p "$PGBOUNCER_RUN"
  # Every database of the Postgres server, as the postgres user; clients are trusted (the
  # pooler listens on 127.0.0.1 only). `options` and `extra_float_digits` are startup
  # parameters sqlx sends and PgBouncer cannot carry per client: behind a pooler the
  # statement timeout belongs on the database role (docs/operations.md).
  cat > "$PGBOUNCER_RUN/pgbouncer.ini" <<INI
[databases]
* = host=$PG_HOST port=$PG_PORT user=postgres password=postgres

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $PGBOUNCER_PORT
unix_socket_dir =
auth_type = trust
auth_file = $PGBOUNCER_RUN/userlist.txt
pool_mode = transaction
max_prepared_statements = 500
ignore_startup_parameters = extra_float_digits,options
default_pool_size = 5
max_client_conn = 2000
logfile = $PGBOUNCER_RUN/pgbouncer.log
pidfile = $PGBOUNCER_RUN/pgbouncer.pid
INI
  echo '"postgres" ""' > "$PGBOUNCER_RUN/userlist.txt"
  log "starting PgBouncer on 127.0.0.1:$PGBOUNCER_PORT (transaction pooling; $PGBOUNCER_RUN)"
  if [ "$(id -u)" -eq 0 ]; then
    chown -R postgres "$PGBOUNCER_RUN"
    "$bin" -d -u postgres "$PGBOUNCER_RUN/pgbouncer.ini"
  else
    "$bin" -d "$PGBOUNCER_RUN/pgbouncer.ini"
  fi
  wait_for 10 pg_isready -q -h 127.0.0.1 -p "$PGBOUNCER_PORT" || {
    log "PgBouncer did not start (see $PGBOUNCER_RUN/pgbouncer.log)"; return 1; }
}

# A Redis Cluster of three masters (no replicas) on 127.0.0.1, for the tests that run the
# binaries against a cluster: Debian's redis-server with --cluster-enabled, joined by
# `redis-cli --cluster create`. Each node keeps nothing on disk but its cluster config, in
# $REDIS_CLUSTER_RUN. Like Redis, it runs detached and outlives the script that started it.
REDIS_CLUSTER_PORTS=${REDIS_CLUSTER_PORTS:-"6481 6482 6483"}
REDIS_CLUSTER_RUN=${REDIS_CLUSTER_RUN:-/tmp/parley-redis-cluster-$(id -u)}

# True when every node answers, and all of them form one cluster that serves every slot.
redis_cluster_ok() {
  local port info count=0
  for port in $REDIS_CLUSTER_PORTS; do count=$((count + 1)); done
  for port in $REDIS_CLUSTER_PORTS; do
    info=$(redis-cli -h 127.0.0.1 -p "$port" cluster info 2>/dev/null | tr -d '\r') || return 1
    grep -qx 'cluster_state:ok' <<<"$info" || return 1
    grep -qx 'cluster_slots_ok:16384' <<<"$info" || return 1
    grep -qx "cluster_known_nodes:$count" <<<"$info" || return 1
  done
}

# REDIS_URL of the cluster: its nodes, separated by commas.
redis_cluster_url() {
  local port urls=()
  for port in $REDIS_CLUSTER_PORTS; do urls+=("redis://127.0.0.1:$port"); done
  (IFS=,; echo "${urls[*]}")
}

ensure_redis_cluster() {
  if ! command -v redis-server >/dev/null || ! command -v redis-cli >/dev/null; then
    apt_install redis-server redis-tools
  fi
  redis_cluster_ok && return 0
  local port nodes=()
  # Only nodes this script started (their directory is ours) are ever reset: a Redis of
  # someone else's on these ports is left alone.
  for port in $REDIS_CLUSTER_PORTS; do
    redis-cli -h 127.0.0.1 -p "$port" ping >/dev/null 2>&1 || continue
    [ "$(redis-cli -h 127.0.0.1 -p "$port" config get dir 2>/dev/null | sed -n 2p)" = "$REDIS_CLUSTER_RUN/$port" ] || {
      log "127.0.0.1:$port is a Redis this script did not start: set REDIS_CLUSTER_PORTS to free ports"; return 1; }
  done
  # A cluster that is only failing over heals by itself within its node timeout.
  if wait_for 5 redis_cluster_ok; then return 0; fi
  log "starting a Redis Cluster of three masters on 127.0.0.1 ports $REDIS_CLUSTER_PORTS ($REDIS_CLUSTER_RUN)"
  for port in $REDIS_CLUSTER_PORTS; do
    nodes+=("127.0.0.1:$port")
    if ! redis-cli -h 127.0.0.1 -p "$port" ping >/dev/null 2>&1; then
      mkdir -p "$REDIS_CLUSTER_RUN/$port"
      rm -f "$REDIS_CLUSTER_RUN/$port/nodes.conf"
      redis-server --daemonize yes --bind 127.0.0.1 --port "$port" --cluster-enabled yes \
        --cluster-config-file nodes.conf --dir "$REDIS_CLUSTER_RUN/$port" --save "" \
        --appendonly no --logfile "$REDIS_CLUSTER_RUN/$port/redis.log" || return 1
      wait_for 10 redis-cli -h 127.0.0.1 -p "$port" ping || {
        log "Redis on port $port did not start (see $REDIS_CLUSTER_RUN/$port/redis.log)"; return 1; }
    fi
  done
  # What is left of a broken cluster (a node restarted empty) starts over, empty.
  for port in $REDIS_CLUSTER_PORTS; do
    redis-cli -h 127.0.0.1 -p "$port" flushall >/dev/null
    redis-cli -h 127.0.0.1 -p "$port" cluster reset hard >/dev/null
  done
  redis-cli --cluster create "${nodes[@]}" --cluster-yes >"$REDIS_CLUSTER_RUN/create.log" 2>&1 || {
    log "the Redis Cluster was not formed (see $REDIS_CLUSTER_RUN/create.log)"; return 1; }
  wait_for 20 redis_cluster_ok || { log "the Redis Cluster did not become ready"; return 1; }
}
