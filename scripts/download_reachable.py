"""Can Playwright's browser download reach its host from here? Reads the
output of `playwright install --dry-run chromium` on stdin and tries a TCP
connection to each download address it names (the URL and its fallbacks),
CONNECT_S each. Exits 0 when one answers, or when a proxy is set (the
download then goes through it, which only the download can judge); else
says, in one line on stderr, which hosts could not be reached, and exits 1.

scripts/setup.sh asks it before the download, which on a machine without
the internet would otherwise try each address in turn, for up to minutes
where connections are dropped rather than refused.
"""

from __future__ import annotations

import os
import re
import socket
import sys
from urllib.parse import urlsplit

CONNECT_S = 5.0
PROXIES = ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy")


def addresses(dry_run: str) -> list[tuple[str, int]]:
    """Each (host, port) the download would try, in order, once."""
    found: list[tuple[str, int]] = []
    for url in re.findall(r"Download (?:url|fallback \d+):\s+(\S+)", dry_run):
        parts = urlsplit(url)
        if parts.hostname:
            address = (parts.hostname, parts.port or (443 if parts.scheme == "https" else 80))
            if address not in found:
                found.append(address)
    return found


def reachable(address: tuple[str, int]) -> bool:
    try:
        with socket.create_connection(address, timeout=CONNECT_S):
            return True
    except OSError:
        return False


def main() -> int:
    if any(os.environ.get(name) for name in PROXIES):
        return 0
    tried = addresses(sys.stdin.read())
    if not tried or any(reachable(address) for address in tried):
        return 0  # nothing named (an output this script does not know): let the download judge
    hosts = ", ".join(f"{host}:{port}" for host, port in tried)
    print(f"no connection to Playwright's download hosts ({hosts}) within {CONNECT_S:g} s each", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
