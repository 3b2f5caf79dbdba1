#!/usr/bin/env bash
# Make sure Redis and PostgreSQL answer at $REDIS_URL and $DATABASE_URL (local defaults); start throwaway
# ones when they don't; install Debian's Chromium for the browser test. Needs root for apt-get; tests
# that need a service skip, saying why, if it is absent.
set -uo pipefail
PY=${PY:-.venv/bin/python}

redis_up() { "$PY" - <<'PY' 2>/dev/null
import os, redis
redis.Redis.from_url(os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/15"), socket_timeout=2).ping()
PY
}
postgres_up() { "$PY" - <<'PY' 2>/dev/null
import os, sqlalchemy
url = os.environ.get("DATABASE_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test")
sqlalchemy.create_engine(url, connect_args={"connect_timeout": 3}).connect().close()
PY
}
apt_install() {
  command -v apt-get >/dev/null || return 1
  [ -n "${APT_UPDATED:-}" ] || { apt-get update -qq >/dev/null 2>&1 || true; APT_UPDATED=1; }
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null 2>&1
}

if ! redis_up; then
  echo "services: starting a throwaway Redis on 127.0.0.1:6379"
  command -v redis-server >/dev/null || apt_install redis-server || echo "services: cannot install redis-server"
  redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save "" --appendonly no >/dev/null 2>&1 || true
  for _ in $(seq 1 20); do redis_up && break; sleep 0.5; done
fi
redis_up && echo "services: redis ok" || echo "services: redis unavailable (integration tests that need it will skip)"

if ! postgres_up; then
  echo "services: starting a throwaway PostgreSQL cluster on 127.0.0.1:5432"
  if ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then apt_install postgresql || true; fi
  BIN=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
  if [ -n "$BIN" ]; then
    PGDATA=${PGDATA_THROWAWAY:-/tmp/spanqa-pg}
    rm -rf "$PGDATA"; mkdir -p "$PGDATA"; chown postgres "$PGDATA" 2>/dev/null || true
    run_pg() { if [ "$(id -u)" = 0 ]; then su postgres -s /bin/sh -c "$*"; else sh -c "$*"; fi; }
    run_pg "$BIN/initdb -D $PGDATA -A trust -U postgres" >/dev/null 2>&1
    run_pg "$BIN/pg_ctl -D $PGDATA -o '-k /tmp -h 127.0.0.1 -p 5432' -l $PGDATA/log -w start" >/dev/null 2>&1
    run_pg "$BIN/createdb -h 127.0.0.1 -p 5432 -U postgres test" >/dev/null 2>&1 || true
  fi
fi
postgres_up && echo "services: postgres ok" || echo "services: postgres unavailable (integration tests that need it will skip)"

# The browser test drives Debian's Chromium through its ChromeDriver (never a downloaded browser).
if ! { [ -x /usr/bin/chromium ] && [ -x /usr/bin/chromedriver ]; }; then
  echo "services: installing Debian's chromium and chromium-driver for the browser test"
  apt_install chromium chromium-driver || true
fi
[ -x /usr/bin/chromium ] && [ -x /usr/bin/chromedriver ] && echo "services: chromium ok" \
  || echo "services: chromium unavailable (the browser test will skip)"
exit 0
