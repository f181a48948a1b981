#!/usr/bin/env bash
# Set up this checkout and run the worker (migrations, browser, API on
# PENELOPE_HOST:PENELOPE_PORT, 127.0.0.1:5000 by default).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh base
echo "serve: starting the worker (migrations, the browser, then the API)"
exec .venv/bin/python manage.py serve "$@"
