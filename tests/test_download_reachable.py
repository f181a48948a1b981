"""scripts/download_reachable.py, which scripts/setup.sh asks before it
downloads Playwright's Chromium: a host that cannot be reached is said in
one line, in seconds, instead of a download that tries each address for
minutes (issue 58). Against real sockets on loopback."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

from harness.worker import ROOT

SCRIPT = ROOT / "scripts" / "download_reachable.py"


def asked(dry_run: str, **env: str) -> subprocess.CompletedProcess:
    clean = {key: value for key, value in os.environ.items() if "proxy" not in key.lower()}
    return subprocess.run([sys.executable, str(SCRIPT)], input=dry_run, env={**clean, **env},
                          capture_output=True, text=True, timeout=60)


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]  # nothing listens once it closes


def dry_run(*urls: str) -> str:
    lines = [f"  Download url:        {urls[0]}"]
    lines += [f"  Download fallback {n}: {url}" for n, url in enumerate(urls[1:], 1)]
    return "Chrome for Testing 1.0 (playwright chromium v1)\n  Install location: /x\n" + "\n".join(lines) + "\n"


def test_no_host_answers_is_said_in_one_line():
    first, second = closed_port(), closed_port()
    done = asked(dry_run(f"https://127.0.0.1:{first}/a.zip", f"http://127.0.0.1:{second}/a.zip"))
    assert done.returncode == 1
    assert done.stderr.splitlines() == [
        f"no connection to Playwright's download hosts (127.0.0.1:{first}, 127.0.0.1:{second}) within 5 s each"
    ]


def test_one_host_that_answers_lets_the_download_go():
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        done = asked(dry_run(f"https://127.0.0.1:{closed_port()}/a.zip", f"https://127.0.0.1:{port}/a.zip"))
    assert (done.returncode, done.stderr) == (0, "")


def test_a_proxy_or_an_output_it_does_not_know_lets_the_download_judge():
    unreachable = dry_run(f"https://127.0.0.1:{closed_port()}/a.zip")
    assert asked(unreachable, HTTPS_PROXY="http://127.0.0.1:3128").returncode == 0
    assert asked("something else entirely\n").returncode == 0
