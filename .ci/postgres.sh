# Sourced by .ci/run: starts a throw-away PostgreSQL cluster for the tests and
# exports PURSER_TEST_POSTGRES, a URL (with a password) of a database the
# tests may create schemas in. The cluster lives under a temp dir, runs as an
# unprivileged user (PostgreSQL refuses to run as root), listens on 127.0.0.1
# only, and is stopped and removed when the sourcing shell exits.
# Where PostgreSQL cannot be installed, the variable stays unset and the tests
# that need it skip, saying so.

purser_pg_start() {
  if [ -n "${PURSER_TEST_POSTGRES:-}" ]; then
    echo "using the PostgreSQL in PURSER_TEST_POSTGRES"
    return 0
  fi
  local bin
  bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
  if [ -z "$bin" ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "installing Debian's postgresql package"
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null) || true
    bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
  fi
  if [ -z "$bin" ]; then
    echo "PostgreSQL could not be installed: the tests that need it will skip"
    return 0
  fi

  local user run_as
  user=$(id -un)
  run_as=()
  if [ "$(id -u)" = 0 ]; then
    user=postgres
    id -u "$user" >/dev/null 2>&1 || useradd --system --no-create-home --shell /usr/sbin/nologin "$user"
    run_as=(runuser -u "$user" --)
  fi

  PURSER_PG_DIR=$(mktemp -d "${TMPDIR:-/tmp}/purser-pg.XXXXXX")
  chown "$user" "$PURSER_PG_DIR"
  chmod 700 "$PURSER_PG_DIR"
  local password
  password=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
  (umask 077 && printf '%s\n' "$password" > "$PURSER_PG_DIR/pwfile")
  chown "$user" "$PURSER_PG_DIR/pwfile"
  "${run_as[@]}" "$bin/initdb" -D "$PURSER_PG_DIR/data" -U purser --pwfile="$PURSER_PG_DIR/pwfile" \
    --auth=scram-sha-256 --encoding=UTF8 --no-sync >/dev/null
  rm -f "$PURSER_PG_DIR/pwfile"

  # A free port: try a few, starting from one that depends on the pid, so
  # concurrent CI jobs on one machine do not collide.
  local port started=""
  for attempt in 1 2 3 4 5 6 7 8 9 10; do
    port=$(( 20000 + ($$ * 7 + attempt * 113) % 20000 ))
    if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
      continue # something listens there
    fi
    if "${run_as[@]}" "$bin/pg_ctl" -D "$PURSER_PG_DIR/data" -l "$PURSER_PG_DIR/log" -w -t 60 start \
        -o "-c listen_addresses=127.0.0.1 -p $port -k $PURSER_PG_DIR -c max_connections=300 -c fsync=off" >/dev/null; then
      started=yes
      break
    fi
  done
  if [ -z "$started" ]; then
    echo "PostgreSQL did not start; its log:"
    cat "$PURSER_PG_DIR/log" || true
    return 1
  fi
  PURSER_PG_BIN=$bin
  PURSER_PG_RUN_AS=("${run_as[@]}")
  export PURSER_TEST_POSTGRES="postgres://purser:$password@127.0.0.1:$port/postgres?sslmode=disable"
  echo "PostgreSQL $("$bin/postgres" --version | awk '{print $3}') started on 127.0.0.1:$port (PURSER_TEST_POSTGRES)"
  trap purser_pg_stop EXIT
}

purser_pg_stop() {
  if [ -n "${PURSER_PG_DIR:-}" ]; then
    "${PURSER_PG_RUN_AS[@]}" "$PURSER_PG_BIN/pg_ctl" -D "$PURSER_PG_DIR/data" -m immediate -w stop >/dev/null 2>&1 || true
    rm -rf "$PURSER_PG_DIR"
    PURSER_PG_DIR=""
  fi
}

purser_pg_start
