"""The console's cookie behind a real TLS-terminating proxy: Debian's nginx,
started by the test with its own config on loopback, its certificate made
by the test (a CA of its own and a leaf for 127.0.0.1, which the client
verifies against that CA).

The waker trusts the header PROXY_SSL_HEADER names, and that one only: the
sign-in's cookie is then `Secure` behind the proxy. Unset (the default), no
header is trusted, so a client that sends `X-Forwarded-Proto: https` to the
waker itself over plain HTTP gets no `Secure` cookie. The worker reads the same setting:
its admin signs in behind the proxy, where Django's CSRF check would
otherwise expect an `http://` origin."""

from __future__ import annotations

import datetime
import ipaddress
import os
import re
import shutil
import socket
import ssl
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from harness.waker import WakerProcess, distinct_free_ports
from harness.worker import ROOT, WorkerProcess, wait_until
from penelope_site.env import env_proxy_ssl_header
from tests.conftest import worker_env

COOKIE = "penelope_console"
TRUSTED = "X-Forwarded-Proto: https"


def nginx_path() -> str:
    found = shutil.which("nginx") or shutil.which("nginx", path="/usr/sbin:/usr/local/sbin")
    assert found, "nginx is not installed: scripts/setup.sh dev installs the distribution's"
    return found


def certificate(directory: Path) -> tuple[Path, Path, Path]:
    """A CA of the test's own, and a leaf for 127.0.0.1 and localhost signed by
    it: (the CA's certificate, the leaf's certificate, the leaf's key)."""
    now = datetime.datetime.now(datetime.UTC)
    lasting = (now - datetime.timedelta(minutes=5), now + datetime.timedelta(days=1))
    ca_key, leaf_key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "penelope test CA")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(lasting[0])
        .not_valid_after(lasting[1])
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    leaf = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")]))
        .issuer_name(ca_name)
        .public_key(leaf_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(lasting[0])
        .not_valid_after(lasting[1])
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")]),
            critical=False,
        )
        .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    paths = directory / "ca.pem", directory / "leaf.pem", directory / "leaf.key"
    paths[0].write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    paths[1].write_bytes(leaf.public_bytes(serialization.Encoding.PEM))
    paths[2].write_bytes(
        leaf_key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    return paths


class Nginx:
    """nginx in the foreground with a config of the test's own: TLS on each
    of `ports` on 127.0.0.1, each proxying to its upstream over plain HTTP
    and telling it the scheme (`X-Forwarded-Proto $scheme`)."""

    def __init__(self, directory: Path, upstreams: dict[int, int]):
        self.directory = directory
        self.ca, leaf, key = certificate(directory)
        servers = "".join(
            f"""
    server {{
        listen 127.0.0.1:{port} ssl;
        ssl_certificate {leaf};
        ssl_certificate_key {key};
        location / {{
            proxy_pass http://127.0.0.1:{upstream};
            proxy_set_header Host $http_host;
            proxy_set_header X-Forwarded-Proto $scheme;
        }}
    }}"""
            for port, upstream in upstreams.items()
        )
        temp = "".join(
            f"    {kind}_temp_path {directory / kind};\n"
            for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
        )
        (directory / "nginx.conf").write_text(
            f"daemon off;\nworker_processes 1;\npid {directory / 'nginx.pid'};\nerror_log {directory / 'error.log'};\n"
            f"events {{ worker_connections 64; }}\nhttp {{\n    access_log off;\n{temp}{servers}\n}}\n"
        )
        self.ports = list(upstreams)
        self.process = subprocess.Popen(
            [
                nginx_path(),
                "-p",
                str(directory),
                "-c",
                str(directory / "nginx.conf"),
                "-e",
                str(directory / "error.log"),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.STDOUT,
        )
        wait_until(
            lambda: self.process.poll() is not None or all(map(self.listening, self.ports)), what="nginx to listen"
        )
        assert self.process.poll() is None, (directory / "error.log").read_text()

    @staticmethod
    def listening(port: int) -> bool:
        with socket.socket() as probe:
            return probe.connect_ex(("127.0.0.1", port)) == 0

    def client(self, port: int) -> httpx.Client:
        verifying = ssl.create_default_context(cafile=str(self.ca))
        return httpx.Client(base_url=f"https://127.0.0.1:{port}", verify=verifying, timeout=60)

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=30)


@pytest.fixture(scope="module")
def wakers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, WakerProcess]]:
    """Two wakers with no persona to start: one trusting the proxy's header, one with the default."""
    started = {}
    for name, env in (("trusting", {"PROXY_SSL_HEADER": TRUSTED}), ("default", {})):
        started[name] = WakerProcess(
            tmp_path_factory.mktemp(name), [{"name": "nap", "mode": "sleepy"}], env={**env, "WAKER_FORK_WORKERS": "0"}
        ).start()
    yield started
    for waker in started.values():
        assert waker.stop() == []


@pytest.fixture(scope="module")
def worker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WorkerProcess]:
    """A worker trusting the proxy's header, with an admin user (`op`, `pw`)."""
    running = WorkerProcess(tmp_path_factory.mktemp("store"), env=worker_env(PROXY_SSL_HEADER=TRUSTED)).start()
    subprocess.run(
        [sys.executable, "manage.py", "createsuperuser", "--noinput", "--username", "op", "--email", "op@example.com"],
        cwd=ROOT,
        env={**os.environ, "PENELOPE_STORE": str(running.store), "DJANGO_SUPERUSER_PASSWORD": "pw"},
        check=True,
        capture_output=True,
        timeout=60,
    )
    yield running
    running.stop()


@pytest.fixture(scope="module")
def proxy(
    tmp_path_factory: pytest.TempPathFactory, wakers: dict[str, WakerProcess], worker: WorkerProcess
) -> Iterator[tuple[Nginx, dict[str, int]]]:
    upstreams = {**{name: waker.port for name, waker in wakers.items()}, "worker": worker.port}
    ports = dict(zip(upstreams, distinct_free_ports(len(upstreams)), strict=True))
    running = Nginx(tmp_path_factory.mktemp("nginx"), {ports[name]: port for name, port in upstreams.items()})
    yield running, ports
    running.stop()


def signed_in_cookie(client: httpx.Client, key: str, headers: dict[str, str] | None = None) -> str:
    """The Set-Cookie of a sign-in with the right key."""
    answer = client.post("/console/sign-in", data={"key": key}, headers=headers or {})
    assert answer.status_code == 302, answer.text
    [cookie] = [value for value in answer.headers.get_list("set-cookie") if value.startswith(COOKIE + "=")]
    return cookie


def attributes(cookie: str) -> set[str]:
    return {part.strip().split("=")[0].lower() for part in cookie.split(";")[1:]}


def test_the_console_cookie_is_secure_behind_a_tls_proxy_whose_header_is_trusted(proxy, wakers):
    nginx, ports = proxy
    trusting, default = wakers["trusting"], wakers["default"]
    with nginx.client(ports["trusting"]) as client:
        cookie = signed_in_cookie(client, trusting.key)
        assert {"secure", "httponly", "samesite"} <= attributes(cookie), cookie
        # The browser sends it back over HTTPS: signed in.
        assert client.get("/console/").status_code == 200
    # Unset, no header is trusted: behind the same proxy the cookie is not
    # marked (the docs say to set PROXY_SSL_HEADER there) ...
    with nginx.client(ports["default"]) as client:
        assert "secure" not in attributes(signed_in_cookie(client, default.key))
    # ... and a client that says it came over HTTPS, straight to the waker over
    # plain HTTP, is not believed.
    with httpx.Client(base_url=default.base_url, timeout=60) as client:
        assert "secure" not in attributes(signed_in_cookie(client, default.key, {"X-Forwarded-Proto": "https"}))
        assert "secure" not in attributes(signed_in_cookie(client, default.key))
    # Where it is trusted, plain HTTP without the header is plain HTTP.
    with httpx.Client(base_url=trusting.base_url, timeout=60) as client:
        assert "secure" not in attributes(signed_in_cookie(client, trusting.key))


def test_the_workers_admin_signs_in_behind_the_tls_proxy(proxy):
    """The worker trusts the same setting: through the proxy a browser's
    sign-in comes from an `https://` origin, which Django's CSRF check then
    expects (without the setting it expects `http://` and answers 403)."""
    nginx, ports = proxy
    origin = f"https://127.0.0.1:{ports['worker']}"
    with nginx.client(ports["worker"]) as browser:
        form = browser.get("/admin/login/").text
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', form).group(1)
        login = {"username": "op", "password": "pw", "csrfmiddlewaretoken": token, "next": "/admin/"}
        signed_in = browser.post("/admin/login/", data=login, headers={"Origin": origin})
        assert signed_in.status_code == 302, re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", signed_in.text))[:1500]
        assert browser.get("/admin/jobs/job/").status_code == 200


def test_the_setting_names_a_header_and_its_value(monkeypatch):
    for raw, expected in (
        ("X-Forwarded-Proto: https", ("HTTP_X_FORWARDED_PROTO", "https")),
        ("  x-forwarded-ssl:on ", ("HTTP_X_FORWARDED_SSL", "on")),
        ("", None),
    ):
        monkeypatch.setenv("PROXY_SSL_HEADER", raw)
        assert env_proxy_ssl_header("PROXY_SSL_HEADER") == expected
    for raw in ("X-Forwarded-Proto", "X-Forwarded-Proto:", ": https", "X Forwarded: https", "X_Forwarded: https"):
        monkeypatch.setenv("PROXY_SSL_HEADER", raw)
        with pytest.raises(ValueError, match="PROXY_SSL_HEADER names the header"):
            env_proxy_ssl_header("PROXY_SSL_HEADER")
