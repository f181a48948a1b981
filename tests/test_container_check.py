"""The container check's parts that need no podman (scripts/container-check.sh
itself runs in .ci/run, not here): the image's health check follows
PENELOPE_PORT, the image has what a minimal base lacks, the docs build with
--format docker, the export converts to kinds podman plays, and the check's
webhook receiver accepts the worker's own Standard Webhooks signature."""

from __future__ import annotations

import base64
import importlib.util
import json
import re
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from harness.worker import ROOT
from waker import kubernetes
from waker.personas import ALWAYS

CONTAINERFILE = (ROOT / "Containerfile").read_text()
SCRIPT = ROOT / "scripts" / "container-check.sh"


def load(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / "container" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def healthcheck_code() -> str:
    line = re.search(r"^HEALTHCHECK .*\\\n\s+CMD (\[.*\])$", CONTAINERFILE, re.M)
    command = json.loads(line.group(1))
    assert command[:2] == ["/app/.venv/bin/python", "-c"]
    return command[2]


class Health(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200 if self.path == "/api/v1/health" else 404)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format, *args) -> None:
        pass


def test_the_healthcheck_asks_the_port_the_worker_listens_on():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Health)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = server.server_address[1]
    try:
        def probe(env: dict[str, str]) -> int:
            return subprocess.run([sys.executable, "-c", healthcheck_code()], env=env, capture_output=True, timeout=30).returncode

        assert probe({"PENELOPE_HOST": "0.0.0.0", "PENELOPE_PORT": str(port)}) == 0
        assert probe({"PENELOPE_HOST": "127.0.0.1", "PENELOPE_PORT": str(port)}) == 0
        # Nothing listens on the image's default: the check must not pass there.
        free = ThreadingHTTPServer(("127.0.0.1", 0), Health)
        unused = free.server_address[1]
        free.server_close()
        assert probe({"PENELOPE_HOST": "0.0.0.0", "PENELOPE_PORT": str(unused)}) != 0
    finally:
        server.shutdown()


def test_the_image_has_what_a_minimal_base_lacks_and_is_built_with_its_healthcheck():
    # Playwright's driver links libatomic.so.1; a minimal bookworm has none.
    assert re.search(r"apt-get install [^\n]*\blibatomic1\b", CONTAINERFILE)
    # Files copied 0600 from a checkout would be unreadable to user 10001.
    assert "chmod a+rX,go-w" in CONTAINERFILE
    # podman's OCI format drops HEALTHCHECK: every podman build shown says --format docker.
    for path in (ROOT / "Containerfile", ROOT / "docs" / "guides" / "SCALING.md", SCRIPT):
        for command in re.findall(r"podman build[^\n]*", path.read_text()):
            assert "--format docker" in command, f"{path.name}: {command}"


def exported_play(host_port: int = 18080) -> dict:
    persona = kubernetes.ExportedPersona(name="kube_check", mode=ALWAYS, idle_timeout_s=60, env={"PENELOPE_KEY": "k" * 20})
    files = kubernetes.export([persona], namespace="penelope-check", image="localhost/penelope:check")
    documents = [document for name, docs in files.items() if name != "kustomization.yaml" for document in docs]
    return load("kube_for_podman").convert(documents, host_port)


def test_the_export_becomes_kinds_podman_plays():
    import yaml

    bundle = exported_play()
    played = list(yaml.safe_load_all(bundle["play"]))
    assert [document["kind"] for document in played] == ["PersistentVolumeClaim", "Deployment"]
    assert sorted(bundle["left_out"]) == ["Namespace/penelope-check", "NetworkPolicy/penelope-kube-check", "Service/penelope-kube-check"]
    assert bundle["secrets"] == {"penelope-kube-check": {"PENELOPE_KEY": base64.b64encode(b"k" * 20).decode()}}
    claim, deployment = played
    assert claim["metadata"]["name"] == "store-penelope-kube-check-0"
    pod = deployment["spec"]["template"]["spec"]
    [container] = pod["containers"]
    assert container["imagePullPolicy"] == "Never"
    assert container["ports"][0] == {"name": "http", "containerPort": 5000, "protocol": "TCP", "hostIP": "127.0.0.1", "hostPort": 18080}
    assert not {"startupProbe", "readinessProbe", "livenessProbe"} & set(container)
    assert bundle["probes"] == [f"{probe} GET /api/v1/health on 5000" for probe in ("startupProbe", "readinessProbe", "livenessProbe")]
    volumes = {volume["name"]: volume for volume in pod["volumes"]}
    assert volumes["store"]["persistentVolumeClaim"]["claimName"] == "store-penelope-kube-check-0"
    assert {"penelope-kube-check-tmp", "penelope-kube-check-home", "penelope-kube-check-shm"} <= set(volumes)
    assert {mount["name"] for mount in container["volumeMounts"]} <= set(volumes)
    assert bundle["expect"]["penelope-kube-check"] == {
        "uid": 10001, "gid": 10001, "read_only_root": True, "no_new_privileges": True, "drop_all": True,
        "memory_bytes": 1536 * 2**20, "seccomp": "RuntimeDefault",
    }


def test_the_checks_receiver_takes_the_workers_signature_and_refuses_a_changed_body():
    from jobs.webhooks import new_secret, standard_headers

    check_client = load("check_client")
    secret = new_secret()
    body = json.dumps({"job_id": "0123456789abcdef", "state": "done", "result": {"count": 20}}).encode()
    headers = standard_headers("0123456789abcdef", body, secret, time.time())
    check_client.Receiver.secret = base64.b64decode(secret.removeprefix("whsec_"))
    check_client.Receiver.received = {}
    server = ThreadingHTTPServer(("127.0.0.1", 0), check_client.Receiver)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/hooks/check"
    try:
        def post(data: bytes) -> int:
            request = urllib.request.Request(url, data=data, headers=headers, method="POST")
            try:
                return urllib.request.urlopen(request, timeout=10).status
            except urllib.error.HTTPError as error:
                return error.code

        assert post(body.replace(b"20", b"21")) == 401
        assert post(body) == 200
        assert check_client.Receiver.received == {"0123456789abcdef": json.loads(body)}
    finally:
        server.shutdown()


def test_the_check_script_parses_and_names_its_steps():
    assert subprocess.run(["bash", "-n", str(SCRIPT)], capture_output=True).returncode == 0
    text = SCRIPT.read_text()
    steps = re.findall(r"^step (\w+) ", text, re.M)
    assert steps == ["install", "config", "base", "runtime", "build", "run", "calls", "restart", "security", "export", "kube"]
    # Its own configuration, never the machine's, and runc.
    assert 'export CONTAINERS_CONF="$WORK/containers.conf"' in text and 'runtime = "runc"' in text


@pytest.mark.skipif(not (ROOT / ".ci" / "run").exists(), reason="no .ci/run")
def test_ci_runs_the_check_after_the_tests():
    lines = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines() if line.strip() and not line.startswith("#")]
    tests = next(i for i, line in enumerate(lines) if "scripts/test.sh" in line)
    assert any("scripts/container-check.sh" in line for line in lines[tests + 1 :])
