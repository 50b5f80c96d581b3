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

as_root() {
  if [ "$(id -u)" -eq 0 ]; then "$@"; elif command -v sudo >/dev/null; then sudo "$@"; else
    log "need root for: $*"; return 1; fi
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
      cargo install s3s-fs --version "$S3S_FS_VERSION" --locked --features binary --quiet
    fi
    local root=${PARLEY_S3_DIR:-${XDG_DATA_HOME:-$HOME/.local/share}/parley/s3}
    mkdir -p "$root"
    log "starting s3s-fs on 127.0.0.1:$S3_PORT (objects in $root)"
    setsid s3s-fs --host 127.0.0.1 --port "$S3_PORT" --access-key "$S3_ACCESS_KEY" \
      --secret-key "$S3_SECRET_KEY" "$root" >"$root.log" 2>&1 < /dev/null &
    wait_for 20 bash -c "echo > /dev/tcp/127.0.0.1/$S3_PORT" || { log "s3s-fs did not start (see $root.log)"; return 1; }
  fi
}
