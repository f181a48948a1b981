#!/usr/bin/env bash
# Soaks on the real worker, each accounting for every job:
#   scripts/soak.sh [--rounds N] [--seed S]          the worker killed with SIGKILL at random moments
#   scripts/soak.sh browser [--rounds N] [--seed S]  its browser and renderers killed under load
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh dev
if [ "${1:-}" = browser ]; then
  shift
  exec .venv/bin/python -m tests.support.browser_soak "$@"
fi
exec .venv/bin/python -m tests.support.crash "$@"
