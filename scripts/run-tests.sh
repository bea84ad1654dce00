#!/usr/bin/env bash
# Runs the test files with node:test through tsx. Node 20's --test does not expand globs, so the
# shell does. `run-tests.sh unit` runs the fast tests only (no real etcd).
set -euo pipefail
cd "$(dirname "$0")/.."
shopt -s globstar nullglob
case "${1:-all}" in
  unit) files=(test/unit/**/*.test.ts test/property/**/*.test.ts) ;;
  all) files=(test/**/*.test.ts) ;;
  *) files=("$@") ;;
esac
if [ ${#files[@]} -eq 0 ]; then echo "no test files found" >&2; exit 1; fi
# Integration tests start real etcd processes; one file at a time keeps loopback addresses apart.
exec node --test --test-concurrency=1 --import tsx "${files[@]}"
