#!/usr/bin/env bash
# Set up this checkout with the development requirements and run the whole
# test suite against a real Chromium, real worker processes and SQLite files
# in a throwaway store.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh dev
store=$(mktemp -d)
trap 'rm -rf "$store"' EXIT
PENELOPE_STORE="$store" .venv/bin/python -m pytest "$@"
