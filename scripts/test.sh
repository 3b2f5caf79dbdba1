#!/usr/bin/env bash
# Install everything and run the whole test suite, starting the services the integration tests need
# (Redis, PostgreSQL) when none answers. Used by CI (.ci/run) and by developers.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh --dev
export REDIS_URL=${REDIS_URL:-redis://127.0.0.1:6379/15}
export DATABASE_URL=${DATABASE_URL:-postgresql+psycopg://postgres@127.0.0.1:5432/test}
bash scripts/services.sh
# ruff, ruff format and mypy are a gate like the tests (SPANQA_SKIP_LINT=1 skips them in a quick loop).
if [ -z "${SPANQA_SKIP_LINT:-}" ]; then
  .venv/bin/ruff check .
  .venv/bin/ruff format --check --quiet .
  .venv/bin/mypy
fi
export HF_HUB_OFFLINE=1
# Selenium never looks for a driver to download: the browser test names Debian's.
export SE_OFFLINE=true
exec .venv/bin/python -m pytest -q "$@"
