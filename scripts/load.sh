#!/usr/bin/env bash
# MAX_JOBS jobs held plus 64 concurrent pollers for a minute against a real
# worker. Usage: scripts/load.sh [--seconds 60] [--pollers 64] [--jobs 1000]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh dev
exec .venv/bin/python -m tests.support.load "$@"
