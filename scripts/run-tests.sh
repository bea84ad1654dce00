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
# Two files at a time, one per core. Files that start etcd stay apart: each has its own address
# prefix, the local provider claims an address block in the store and skips any block in use on the
# host, and each network lab has its own number (namespaces, bridge and 198.18.<lab>.0/24).
exec node --test --test-concurrency=2 --import tsx "${files[@]}"
