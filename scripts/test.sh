#!/usr/bin/env bash
# Set up this checkout with the development requirements and run the whole
# test suite against a real Chromium, real worker processes and SQLite files
# in a throwaway store.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh dev
# checkov and kubernetes-validate for tests/test_kubernetes.py, in a venv of
# their own: they pull many dependencies the worker has no use for.
if [ ! -x .venv-checks/bin/python ]; then
  echo "test: creating .venv-checks for the manifests' checks"
  python3 -m venv .venv-checks
fi
.venv-checks/bin/python -m pip install --quiet --disable-pip-version-check -r requirements/checks.txt
store=$(mktemp -d)
trap 'rm -rf "$store"' EXIT
# Two processes on two cores (pytest-xdist), each file whole in one of them
# so that a module's tests share its worker; the `serial` tests run alone
# (pytest.ini, tests/support/parallel.py). Arguments after these win:
# `scripts/test.sh -n 0` runs in one process.
PENELOPE_STORE="$store" .venv/bin/python -m pytest -n 2 --dist loadfile "$@"
