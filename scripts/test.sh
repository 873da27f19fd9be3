#!/usr/bin/env bash
# The whole test suite: lint, types, the import contract, then every test (PostgreSQL and Redis
# tests need initdb/pg_ctl and redis-server on PATH or in /usr/lib/postgresql; they skip without them
# unless LOCKGATE_REQUIRE_SERVERS=1).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh test
.venv/bin/ruff check .
.venv/bin/mypy tap gateway console connector
.venv/bin/lint-imports   # the layering rules (.importlinter)
exec .venv/bin/python -m pytest "$@"
