#!/usr/bin/env bash
# Prepare this checkout to run the worker: a virtual environment with the
# pinned requirements and a Chromium (Playwright's own where it can be
# downloaded, else the distribution's `chromium` package).
# Usage: scripts/setup.sh [base|dev]
set -euo pipefail
cd "$(dirname "$0")/.."
requirements="requirements/${1:-base}.txt"
step() { echo "setup: $*"; }

if [ ! -x .venv/bin/python ]; then
  step "creating the virtual environment .venv"
  python3 -m venv .venv
fi
step "installing $requirements into .venv (a few minutes the first time)"
.venv/bin/python -m pip install --quiet --disable-pip-version-check -r "$requirements"

# The project's bytecode, compiled once: where Python does not write it
# (PYTHONDONTWRITEBYTECODE, a tree the worker may not write), every worker's
# start would compile each module again, 0.1 s of a wake (docs/BENCHMARKS.md).
step "compiling the project's bytecode"
.venv/bin/python -m compileall -q -x '/(\.venv|node_modules|stores?)/' . >/dev/null

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

if [ "${1:-base}" = dev ]; then
  # The suite runs a Puppeteer script against a persona (docs/guides/BRING_YOUR_OWN_SCRIPT.md):
  # Node, and puppeteer-core as requirements/node/package-lock.json pins it (no browser download).
  if ! command -v npm >/dev/null; then
    step "installing Node.js and npm (the distribution's)"
    as_root apt-get update -qq
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends nodejs npm >/dev/null
  fi
  step "installing puppeteer-core into requirements/node/node_modules"
  npm ci --prefix requirements/node --no-audit --no-fund --loglevel=error >/dev/null
  # The suite puts the console behind a TLS-terminating proxy (tests/test_console_tls.py):
  # the distribution's nginx, which each test starts itself with its own config.
  if ! command -v nginx >/dev/null && [ ! -x /usr/sbin/nginx ]; then
    step "installing nginx (the distribution's; its service is not started)"
    as_root apt-get update -qq
    # The package starts a system nginx on port 80 when it can: a busy port
    # fails the install, a free one leaves a root server running. Debian's
    # policy-rc.d (exit 101: no service may start) holds it back for the
    # install, unless the machine already has a policy of its own.
    policy=/usr/sbin/policy-rc.d
    own_policy=0
    if [ ! -e "$policy" ]; then
      printf '#!/bin/sh\nexit 101\n' | as_root tee "$policy" >/dev/null
      as_root chmod 755 "$policy"
      own_policy=1
    fi
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends nginx >/dev/null
    if [ "$own_policy" = 1 ]; then as_root rm -f "$policy"; fi
  fi
fi

has_playwright_chromium() {
  .venv/bin/python - <<'PY'
import os, sys
from playwright.sync_api import sync_playwright
with sync_playwright() as p:
    sys.exit(0 if os.access(p.chromium.executable_path, os.X_OK) else 1)
PY
}

has_system_chromium() {
  command -v chromium >/dev/null || command -v chromium-browser >/dev/null \
    || command -v google-chrome >/dev/null || command -v google-chrome-stable >/dev/null
}

step "looking for a Chromium"
if [ -n "${PENELOPE_BROWSER:-}" ]; then
  step "Chromium: PENELOPE_BROWSER=$PENELOPE_BROWSER"
  exit 0
fi
if [ "${PENELOPE_CHROMIUM:-}" = system ]; then
  # The image (Containerfile), or a host that wants the distribution's
  # Chromium: no attempt at Playwright's download.
  if ! has_system_chromium; then
    step "installing the distribution's chromium package (PENELOPE_CHROMIUM=system)"
    as_root apt-get update -qq
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium >/dev/null
  fi
  step "Chromium: the distribution's, $(command -v chromium || command -v chromium-browser)"
  exit 0
fi
if has_playwright_chromium; then
  step "Chromium: Playwright's own"
  exit 0
fi
# Without the internet the download would try each of its addresses in turn,
# for minutes where connections are dropped: asked first, in seconds.
dry_run=$(.venv/bin/playwright install --dry-run chromium 2>/dev/null || true)
if ! unreachable=$(printf '%s\n' "$dry_run" | .venv/bin/python scripts/download_reachable.py 2>&1); then
  step "Playwright's Chromium cannot be downloaded from here: $unreachable"
elif step "downloading Playwright's Chromium (log in /tmp/penelope-playwright-install.log)" \
  && timeout 600 .venv/bin/playwright install chromium >/tmp/penelope-playwright-install.log 2>&1; then
  # Playwright's Chromium needs the system libraries it links against.
  as_root .venv/bin/playwright install-deps chromium >/dev/null 2>&1 || true
  exit 0
fi
if ! has_system_chromium; then
  step "Playwright's Chromium could not be downloaded; installing the distribution's chromium package"
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
fi
step "Chromium: Playwright's could not be downloaded; using $(command -v chromium || command -v chromium-browser \
  || command -v google-chrome || command -v google-chrome-stable)"
