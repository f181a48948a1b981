#!/usr/bin/env bash
# Set up this checkout and run the worker (migrations, browser, API on
# PENELOPE_HOST:PENELOPE_PORT, 127.0.0.1:5000 by default).
set -euo pipefail
cd "$(dirname "$0")/.."

# A busy port is said first, before minutes of set-up: the worker's own check
# (core/serving.py needs only Python's standard library), on the address
# `serve` will take from its arguments or the environment.
host=${PENELOPE_HOST:-127.0.0.1}
port=${PENELOPE_PORT:-5000}
args=("$@")
for ((i = 0; i < ${#args[@]}; i++)); do
  case "${args[i]}" in
    --port) port=${args[i + 1]:-$port} ;;
    --port=*) port=${args[i]#--port=} ;;
    --host) host=${args[i + 1]:-$host} ;;
    --host=*) host=${args[i]#--host=} ;;
  esac
done
python3 - "$host" "$port" <<'PY'
import sys

sys.path.insert(0, ".")
from core.serving import PortInUse, check_port_free

try:
    check_port_free(sys.argv[1], int(sys.argv[2]), setting="PENELOPE_PORT")
except PortInUse as error:
    sys.exit(f"serve: {error}")
except ValueError:
    pass  # not a port number: `serve` itself says so
PY

scripts/setup.sh base
echo "serve: starting the worker (migrations, the browser, then the API)"
# The worker's start line counts from here, not from this script's start (core/start_clock.py).
export PENELOPE_EXEC_AT=${EPOCHREALTIME:-}
exec .venv/bin/python manage.py serve "$@"
