#!/usr/bin/env bash
# Build the web console into console/web/dist (committed package data: no Node.js at run time).
# Needs Node.js 20+ and npm; installs exactly package-lock.json, then type-checks and builds,
# then stamps the build with the hash of the sources (tests/web/test_build_fresh.py checks it).
set -euo pipefail
cd "$(dirname "$0")/.."
(cd web && npm ci --no-audit --no-fund && npx tsc --noEmit && npx vite build)
python3 scripts/web_source_hash.py --write
