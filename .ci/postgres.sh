# Sourced by .ci/run: a throwaway PostgreSQL cluster on loopback for the
# tests of both dialects. It installs Debian's postgresql package when no
# server binaries are present, runs the cluster as an unprivileged user (the
# package's "postgres" user when run as root), listens on 127.0.0.1 on a free
# port from 55432 up, trusts local connections, does not fsync, stops it when
# the script exits, and exports NPCD_TEST_POSTGRES. A NPCD_TEST_POSTGRES
# already set is used as is.

pg_bindir() {
  ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1
}

start_test_postgres() {
  if [ -n "${NPCD_TEST_POSTGRES:-}" ]; then
    echo "using NPCD_TEST_POSTGRES from the environment"
    return
  fi
  local bindir
  bindir=$(pg_bindir)
  if [ -z "$bindir" ] || [ ! -x "$bindir/initdb" ]; then
    local sudo=""
    if [ "$(id -u)" != 0 ]; then sudo="sudo -n"; fi
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends postgresql >/dev/null
    bindir=$(pg_bindir)
  fi
  "$bindir/postgres" --version

  # initdb refuses to run as root: the cluster belongs to an unprivileged user.
  local as=()
  local owner
  owner=$(id -un)
  if [ "$(id -u)" = 0 ]; then
    owner=postgres
    id -u "$owner" >/dev/null 2>&1 || useradd --system --no-create-home "$owner"
    as=(runuser -u "$owner" --)
  fi
  PGTEST_DIR=$(mktemp -d /tmp/npcd-pg.XXXXXX)
  chown "$owner" "$PGTEST_DIR"
  local port=55432
  while (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; do
    port=$((port + 1))
  done
  "${as[@]}" "$bindir/initdb" -D "$PGTEST_DIR/data" -U postgres --auth=trust -E UTF8 --no-sync >/dev/null
  PGTEST_STOP=("${as[@]}" "$bindir/pg_ctl" -D "$PGTEST_DIR/data" -m immediate stop)
  trap 'stop_test_postgres' EXIT
  "${as[@]}" "$bindir/pg_ctl" -D "$PGTEST_DIR/data" -l "$PGTEST_DIR/log" -w -o \
    "-c listen_addresses=127.0.0.1 -p $port -k $PGTEST_DIR -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=300" \
    start >/dev/null
  "$bindir/psql" -q -h 127.0.0.1 -p "$port" -U postgres -d postgres -c "CREATE DATABASE npcd_test"
  export NPCD_TEST_POSTGRES="postgres://postgres@127.0.0.1:$port/npcd_test?sslmode=disable"
  echo "NPCD_TEST_POSTGRES=$NPCD_TEST_POSTGRES"
}

stop_test_postgres() {
  "${PGTEST_STOP[@]}" >/dev/null 2>&1 || true
  rm -rf "$PGTEST_DIR"
}
