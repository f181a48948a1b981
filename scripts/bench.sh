#!/usr/bin/env bash
# Benchmarks: jobs against the stack's own limit and against a peer (RQ on
# Redis), in one run on this machine. Sets up the checkout with the
# development and benchmark requirements, installs redis-server and wrk from
# the distribution's packages when missing, then runs `python -m bench.run`.
# Usage: scripts/bench.sh [--quick] [--out PATH] [--only PHASE,...] [--profile DIR]
# A full run writes docs/BENCHMARKS.md; --quick (about a minute) only prints.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh dev
.venv/bin/python -m pip install --quiet --disable-pip-version-check -r requirements/bench.txt

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

missing=()
command -v redis-server >/dev/null || missing+=(redis-server)
command -v wrk >/dev/null || missing+=(wrk)
if [ ${#missing[@]} -gt 0 ]; then
  echo "Installing ${missing[*]} from the distribution's packages."
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi
exec .venv/bin/python -m bench.run "$@"
