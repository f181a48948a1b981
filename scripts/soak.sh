#!/usr/bin/env bash
# Crash the real worker again and again (SIGKILL at random moments) and
# account for every job. Usage: scripts/soak.sh [--rounds N] [--seed S]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh dev
exec .venv/bin/python -m tests.support.crash "$@"
