#!/usr/bin/env bash
# Run Lockgate on its embedded defaults: SQLite file ./lockgate.sqlite3, no Redis,
# http://127.0.0.1:8080.  Extra arguments go to `twistd lockgate` (see --help).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
exec .venv/bin/twistd --pidfile= -n lockgate "$@"
