#!/usr/bin/env bash
# Create .venv (Python 3.11) and install Lockgate into it; extras given as $1 (e.g. "test").
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3.11}
command -v "$PYTHON" >/dev/null || PYTHON=python3
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
stamp=".venv/.installed-${1:-base}"
if [ ! -f "$stamp" ] || [ setup.cfg -nt "$stamp" ] || [ constraints.txt -nt "$stamp" ]; then
  .venv/bin/python -m pip install -q --upgrade pip
  target="."
  [ -n "${1:-}" ] && target=".[$1]"
  # setup.cfg's package_dir "=." makes the editable install a plain path entry for the
  # checkout, so twistd finds twisted/plugins/lockgate.py there (no compat mode needed);
  # every transitive dependency pinned by constraints.txt (regenerate: bash scripts/lock.sh)
  .venv/bin/python -m pip install -q -c constraints.txt -e "$target"
  touch "$stamp"
fi
