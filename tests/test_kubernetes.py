"""The Kubernetes deployment, validated without a cluster: the overlay
`manage.py waker export-kubernetes` builds from the README's personas
example, and the base, against a current Kubernetes version's schemas
(kubernetes-validate, strict); KEDA's objects, which it does not know, for
the fields docs/guides/SCALING.md relies on; checkov over the manifests and
the Containerfile, every failed check listed with its reason in the guide.
The checks run from .venv-checks (scripts/test.sh makes it)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from core.awake import write_next_wake
from harness.worker import ROOT
from tests.test_first_hour import readme_block

KUBERNETES_VERSION = "1.37.0"
CHECKS_BIN = ROOT / ".venv-checks" / "bin"
BASE = ROOT / "deploy" / "kubernetes" / "base"
GUIDE = (ROOT / "docs" / "guides" / "SCALING.md").read_text()
KEDA_KINDS = {"HTTPScaledObject", "ScaledObject", "TriggerAuthentication"}


def checks_tool(name: str) -> Path:
    tool = CHECKS_BIN / name
    assert tool.exists(), f"{tool} is missing: scripts/test.sh installs requirements/checks.txt into .venv-checks"
    return tool


def readme_personas() -> dict:
    block = readme_block("## Running several personas", "bash")
    return json.loads(block.split("<<'JSON'\n")[1].split("\nJSON")[0])


def export(tmp_path: Path, personas: dict, *args: str) -> subprocess.CompletedProcess:
    personas_file = tmp_path / "personas.json"
    personas_file.write_text(json.dumps(personas))
    return subprocess.run(
        [sys.executable, "manage.py", "waker", "export-kubernetes", str(personas_file), "--namespace", "penelope-test", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "DJANGO_SETTINGS_MODULE": ""},
    )


@pytest.fixture(scope="module")
def overlay(tmp_path_factory) -> Path:
    """The README's personas as an overlay folder."""
    folder = tmp_path_factory.mktemp("overlay")
    done = export(folder, readme_personas(), "--output", str(folder / "out"), "--image", "registry.example/penelope:1.0")
    assert done.returncode == 0, done.stderr
    return folder / "out"


def documents(folder: Path) -> list[dict]:
    return [doc for path in sorted(folder.glob("*.yaml")) if path.name != "kustomization.yaml" for doc in yaml.safe_load_all(path.read_text()) if doc]


def by_kind(docs: list[dict], kind: str) -> dict[str, dict]:
    return {doc["metadata"]["name"]: doc for doc in docs if doc["kind"] == kind}


def validate(paths: list[Path]) -> None:
    done = subprocess.run(
        [str(checks_tool("kubernetes-validate")), "--strict", "--kubernetes-version", KUBERNETES_VERSION, *map(str, paths)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    # Every resource of Kubernetes' own was checked against its schema, none skipped unknown.
    unknown = [line for line in done.stdout.splitlines() if "Couldn't find schema" in line]
    assert all(any(kind in line for kind in KEDA_KINDS | {"Kustomization"}) for line in unknown), unknown


def test_the_base_passes_kubernetes_schemas_strictly():
    validate([path for path in BASE.glob("*.yaml") if path.name != "kustomization.yaml"])


def test_the_overlay_from_the_readme_passes_kubernetes_schemas_strictly(overlay):
    kept = overlay.parent / "kubernetes-only"
    kept.mkdir(exist_ok=True)
    for index, doc in enumerate(documents(overlay)):
        if doc["kind"] not in KEDA_KINDS:
            (kept / f"{index:02d}-{doc['kind']}.yaml").write_text(yaml.safe_dump(doc))
    validate(sorted(kept.glob("*.yaml")))
    kinds = sorted(doc["kind"] for doc in documents(overlay))
    assert kinds.count("StatefulSet") == len(readme_personas()["personas"])


def persona_documents(docs: list[dict]) -> list[dict]:
    """The personas' own resources: the console's and the namespace left out."""
    return [doc for doc in docs if "penelope.dev/persona" in doc["metadata"].get("labels", {})]


def test_each_persona_gets_its_name_settings_secrets_and_mode(tmp_path, overlay):
    docs = persona_documents(documents(overlay))
    sets, secrets, services = by_kind(docs, "StatefulSet"), by_kind(docs, "Secret"), by_kind(docs, "Service")
    assert set(sets) == set(services) == set(secrets) == {"penelope-alice", "penelope-bob"}
    assert {doc["metadata"]["namespace"] for doc in documents(overlay) if doc["kind"] != "Namespace"} == {"penelope-test"}
    bob = sets["penelope-bob"]["spec"]["template"]["spec"]
    [container] = bob["containers"]
    env = {item["name"]: item.get("value") for item in container["env"]}
    assert env["MAX_PAGES"] == "4" and env["IDLE_TIMEOUT_S"] == "300" and env["CHROMIUM_SANDBOX"] == "0"
    assert (env["PENELOPE_STORE"], env["PENELOPE_HOST"], env["PENELOPE_PORT"]) == ("/data/store", "0.0.0.0", "5000")
    assert container["image"] == "registry.example/penelope:1.0"
    assert bob["securityContext"]["runAsNonRoot"] is True and container["securityContext"]["allowPrivilegeEscalation"] is False
    assert bob["terminationGracePeriodSeconds"] == 300 + 5 + 10 + 30
    assert sets["penelope-bob"]["spec"]["volumeClaimTemplates"][0]["metadata"]["name"] == "store"
    # The benchmark's charged figures: a working set of 0.82 GB and a charge of 1.06 GB with eight pages.
    assert container["resources"]["requests"]["memory"] == "1Gi" and container["resources"]["limits"]["memory"] == "1536Mi"
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        assert container[probe]["httpGet"]["path"] == "/api/v1/health"
    # Secrets in the Secret, never in the manifest's env; the key is generated when neither env nor store has
    # one; the console's read key beside it (test_the_console_reads_each_persona_...).
    assert set(secrets["penelope-bob"]["stringData"]) == {"PENELOPE_KEY", "CONSOLE_READ_KEY", "PENELOPE_READ_KEYS"}
    # A sleepy persona's replicas are KEDA's; an always one is one replica, with no KEDA object.
    assert "replicas" not in sets["penelope-alice"]["spec"] and "replicas" not in sets["penelope-bob"]["spec"]
    always = readme_personas()
    always["personas"][1]["mode"] = "always"
    always["personas"][1]["env"] = {"PENELOPE_PROXY": "http://user:pass@proxy.lan:3128", "PENELOPE_KEY": "bob-key-0123456789"}
    streamed = export(tmp_path, always, "--no-console")
    assert streamed.returncode == 0, streamed.stderr
    docs = [doc for doc in yaml.safe_load_all(streamed.stdout) if doc]
    assert by_kind(docs, "StatefulSet")["penelope-bob"]["spec"]["replicas"] == 1
    assert not [doc for doc in docs if doc["kind"] in KEDA_KINDS and doc["metadata"]["labels"]["penelope.dev/persona"] == "bob"]
    bob_secret = by_kind(docs, "Secret")["penelope-bob"]["stringData"]
    assert bob_secret == {"PENELOPE_KEY": "bob-key-0123456789", "PENELOPE_PROXY": "http://user:pass@proxy.lan:3128"}
    assert "proxy.lan" not in json.dumps(by_kind(docs, "StatefulSet"))


def test_keda_objects_have_the_fields_the_guide_relies_on(overlay):
    """Not validated against KEDA's CRDs here (no cluster, no CRDs): the
    fields docs/guides/SCALING.md describes, one by one."""
    docs = documents(overlay)
    for persona in ("alice", "bob"):
        name = f"penelope-{persona}"
        http = by_kind(docs, "HTTPScaledObject")[name]
        assert http["apiVersion"] == "http.keda.sh/v1alpha1"
        assert http["metadata"]["annotations"] == {"httpscaledobject.keda.sh/skip-scaledobject-creation": "true"}
        assert http["spec"]["hosts"] == [f"{persona}.penelope.internal"]
        assert http["spec"]["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": name, "service": name, "port": 5000}
        assert http["spec"]["replicas"] == {"min": 0, "max": 1}
        auth = by_kind(docs, "TriggerAuthentication")[name]
        assert auth["spec"]["secretTargetRef"] == [{"parameter": "token", "name": name, "key": "PENELOPE_KEY"}]
        scaled = by_kind(docs, "ScaledObject")[f"{name}-awake"]
        assert scaled["apiVersion"] == "keda.sh/v1alpha1"
        assert scaled["spec"]["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": name}
        assert (scaled["spec"]["minReplicaCount"], scaled["spec"]["maxReplicaCount"]) == (0, 1)
        push, awake = scaled["spec"]["triggers"]
        assert push == {"type": "external-push", "metadata": {"httpScaledObject": name, "scalerAddress": "keda-add-ons-http-external-scaler.keda:9090"}}
        assert awake["type"] == "metrics-api" and awake["authenticationRef"] == {"name": name}
        assert awake["metadata"] == {
            "url": f"http://{name}.penelope-test.svc.cluster.local:5000/api/v1/activity",
            "valueLocation": "stay_awake",
            "targetValue": "1",
            "activationTargetValue": "0",
            "authMode": "bearer",
        }
        # The trigger's URL reaches the Service on the port it serves.
        assert by_kind(docs, "Service")[name]["spec"]["ports"][0]["port"] == 5000
    assert "not validated against KEDA's CRDs" in GUIDE


def test_the_overlay_builds_with_kustomize(overlay):
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("kubectl is not on PATH: the overlay's kustomization is checked only where it is")
    for folder in (overlay, BASE):
        done = subprocess.run([kubectl, "kustomize", str(folder)], capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr


def documented_failures() -> dict[str, str]:
    """The guide's list: `- CKV_...: reason` under its checkov heading."""
    section = GUIDE.split("### Checks that fail, and why", 1)[1].split("\n#", 1)[0]
    return dict(re.findall(r"^- `(CKV2?_[A-Z0-9_]+)`[^:]*: (.+)$", section, re.M))


def test_checkov_fails_no_check_the_guide_does_not_explain(overlay, tmp_path):
    manifests = tmp_path / "manifests"
    shutil.copytree(BASE, manifests / "base")
    shutil.copytree(overlay, manifests / "overlay")
    # checkov knows a Dockerfile by its name only.
    (manifests / "image").mkdir()
    shutil.copy(ROOT / "Containerfile", manifests / "image" / "Dockerfile")
    done = subprocess.run(
        [
            str(checks_tool("checkov")), "--skip-download", "--compact", "--quiet", "--output", "json",
            "--framework", "kubernetes", "dockerfile", "--directory", str(manifests),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "BC_SKIP_MAPPING": "TRUE"},
    )
    reports = json.loads(done.stdout)
    reports = reports if isinstance(reports, list) else [reports]
    assert {report["check_type"] for report in reports} == {"kubernetes", "dockerfile"}, done.stdout[:2000]
    assert all(report["summary"]["parsing_errors"] == 0 for report in reports)
    failed = {(check["check_id"], check["check_name"]) for report in reports for check in report["results"]["failed_checks"]}
    explained = documented_failures()
    assert explained, "the guide lists no checks"
    unexplained = sorted(f"{check_id} {name}" for check_id, name in failed if check_id not in explained)
    assert unexplained == [], f"failed checks docs/guides/SCALING.md does not explain: {unexplained}"
    # The list holds only checks that fail: a check fixed comes off it.
    assert sorted(set(explained) - {check_id for check_id, _ in failed}) == []


def test_the_containerfile_installs_through_setup_sh_as_a_non_root_user():
    text = (ROOT / "Containerfile").read_text()
    assert text.startswith("#") and "FROM debian:bookworm-slim" in text
    assert "PENELOPE_CHROMIUM=system scripts/setup.sh base" in text
    assert re.search(r"^USER 10001", text, re.M) and "HEALTHCHECK" in text and "/api/v1/health" in text
    assert 'CMD ["/app/.venv/bin/python", "manage.py", "serve"]' in text
    assert "PENELOPE_STORE=/data/store" in text and 'VOLUME ["/data/store"]' in text and "CHROMIUM_SANDBOX=0" in text


def test_setup_takes_the_distributions_chromium_when_told():
    if shutil.which("chromium") is None:
        pytest.skip("no distribution Chromium here: setup.sh would install the package")
    done = subprocess.run(
        ["bash", "scripts/setup.sh", "base"], cwd=ROOT, capture_output=True, text=True, timeout=600,
        env={**os.environ, "PENELOPE_CHROMIUM": "system"},
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == f"setup: Chromium: the distribution's, {shutil.which('chromium')}"
    assert "downloading Playwright" not in done.stdout


def test_export_refuses_a_bad_namespace_and_clashing_names(tmp_path):
    bad = export(tmp_path, readme_personas(), "--namespace", "Not_A_Name")
    assert bad.returncode != 0 and "is not a Kubernetes name" in bad.stderr
    clash = {"personas": [{"name": "a_b", "store": "x", "port": 5001}, {"name": "a-b", "store": "y", "port": 5002}]}
    done = export(tmp_path, clash)
    assert done.returncode != 0 and "would both be penelope-a-b on Kubernetes" in done.stderr


def test_a_sleepy_persona_with_schedules_runs_always_on_the_cluster(tmp_path):
    personas = readme_personas()
    bob = personas["personas"][1]
    assert bob["mode"] == "sleepy"
    store = (tmp_path / bob["store"]).resolve()
    store.mkdir(parents=True)
    write_next_wake(store, 1_800_000_000.0)  # what its worker records while it has a schedule
    exported = export(tmp_path, personas)
    assert exported.returncode == 0, exported.stderr
    assert "Persona bob is sleepy but has schedules: it runs always" in exported.stderr
    docs = [doc for doc in yaml.safe_load_all(exported.stdout) if doc]
    assert by_kind(docs, "StatefulSet")["penelope-bob"]["spec"]["replicas"] == 1
    assert not [doc for doc in docs if doc["kind"] in KEDA_KINDS and doc["metadata"]["labels"]["penelope.dev/persona"] == "bob"]
    # Without schedules it sleeps as before.
    write_next_wake(store, None)
    docs = [doc for doc in yaml.safe_load_all(export(tmp_path, personas).stdout) if doc]
    assert "replicas" not in by_kind(docs, "StatefulSet")["penelope-bob"]["spec"]


def test_a_personas_credentials_key_goes_in_its_secret_from_its_env_or_its_store(tmp_path):
    """Without it a store copied to the cluster holds credentials no worker
    there opens: the key its store keeps on this host goes in its Secret, or
    the one its `env` names, and never in the manifest's env."""
    personas = readme_personas()
    alice, bob = personas["personas"]
    store = (tmp_path / bob["store"]).resolve()
    store.mkdir(parents=True)
    (store / "credentials_key").write_text("c3RvcmVkLWtleS0wMTIzNDU2Nzg5YWJjZGVmMDEyMzQ1Ng==\n")
    alice["env"] = {**alice.get("env", {}), "CREDENTIALS_KEY": "ZW52LWtleS0wMTIzNDU2Nzg5YWJjZGVmMDEyMzQ1Njc4OQ=="}
    exported = export(tmp_path, personas)
    assert exported.returncode == 0, exported.stderr
    docs = [doc for doc in yaml.safe_load_all(exported.stdout) if doc]
    secrets = by_kind(docs, "Secret")
    assert secrets["penelope-bob"]["stringData"]["CREDENTIALS_KEY"] == "c3RvcmVkLWtleS0wMTIzNDU2Nzg5YWJjZGVmMDEyMzQ1Ng=="
    assert secrets["penelope-alice"]["stringData"]["CREDENTIALS_KEY"] == "ZW52LWtleS0wMTIzNDU2Nzg5YWJjZGVmMDEyMzQ1Njc4OQ=="
    for stateful in by_kind(docs, "StatefulSet").values():
        [container] = stateful["spec"]["template"]["spec"]["containers"]
        [entry] = [item for item in container["env"] if item["name"] == "CREDENTIALS_KEY"]
        assert entry["valueFrom"]["secretKeyRef"]["key"] == "CREDENTIALS_KEY" and "value" not in entry


# --- the console -----------------------------------------------------------------------------


def env_of(container: dict) -> dict[str, dict]:
    return {item["name"]: item for item in container["env"]}


def test_the_console_reads_each_persona_through_its_service_with_a_read_key_from_its_secret(overlay, tmp_path):
    """The console's Deployment runs `manage.py console` on the workers' image;
    its fleet file (a ConfigMap) names each persona's Service and the variable
    its read key is in; that variable comes from the persona's Secret, whose
    PENELOPE_READ_KEYS (the worker's env) holds the same key. The fleet file
    loads as the console loads it, with the keys as the cluster would give them."""
    from console.fleet_file import load_fleet

    docs = documents(overlay)
    assert "console.yaml" in yaml.safe_load((overlay / "kustomization.yaml").read_text())["resources"]
    console = [doc for doc in docs if doc["metadata"]["name"] == "penelope-console"]
    assert sorted(doc["kind"] for doc in console) == ["ConfigMap", "Deployment", "NetworkPolicy", "Secret", "Service"]
    deployment = by_kind(docs, "Deployment")["penelope-console"]
    assert deployment["spec"]["replicas"] == 1
    pod = deployment["spec"]["template"]["spec"]
    [container] = pod["containers"]
    assert container["image"] == "registry.example/penelope:1.0"
    assert container["command"] == ["/app/.venv/bin/python", "manage.py", "console"]
    # As tightly as the workers: the same user, no capabilities, a read-only root.
    worker_pod = by_kind(docs, "StatefulSet")["penelope-alice"]["spec"]["template"]["spec"]
    assert pod["securityContext"] == worker_pod["securityContext"]
    assert container["securityContext"] == worker_pod["containers"][0]["securityContext"]
    assert pod["automountServiceAccountToken"] is False
    env = env_of(container)
    assert env["WAKER_KEY"]["valueFrom"]["secretKeyRef"] == {"name": "penelope-console", "key": "WAKER_KEY"}
    assert by_kind(docs, "Secret")["penelope-console"]["stringData"]["WAKER_KEY"]
    assert container["readinessProbe"]["httpGet"] == {"path": "/console/sign-in", "port": "http"}
    assert by_kind(docs, "Service")["penelope-console"]["spec"]["ports"][0]["port"] == int(env["CONSOLE_PORT"]["value"])

    fleet_dir, fleet_name = env["CONSOLE_FLEET"]["value"].rsplit("/", 1)
    [mount] = [mount for mount in container["volumeMounts"] if mount["mountPath"] == fleet_dir]
    [volume] = [volume for volume in pod["volumes"] if volume["name"] == mount["name"]]
    config = by_kind(docs, "ConfigMap")[volume["configMap"]["name"]]
    (tmp_path / fleet_name).write_text(config["data"][fleet_name])
    secrets = by_kind(docs, "Secret")

    def secret_value(item: dict) -> str:
        reference = item["valueFrom"]["secretKeyRef"]
        return secrets[reference["name"]]["stringData"][reference["key"]]

    environ = {name: secret_value(item) for name, item in env.items() if "valueFrom" in item}
    personas = {persona.name: persona for persona in load_fleet(tmp_path / fleet_name, environ)}
    assert set(personas) == {"alice", "bob"}
    for name, persona in personas.items():
        assert persona.url == f"http://penelope-{name}.penelope-test.svc.cluster.local:5000"
        assert persona.mode == "sleepy"
        stored = secrets[f"penelope-{name}"]["stringData"]
        assert persona.read_key == stored["CONSOLE_READ_KEY"] and persona.read_key in stored["PENELOPE_READ_KEYS"].split()
        assert len(persona.read_key) >= 32 and persona.read_key not in stored["PENELOPE_KEY"].split()
        [worker] = by_kind(docs, "StatefulSet")[f"penelope-{name}"]["spec"]["template"]["spec"]["containers"]
        assert env_of(worker)["PENELOPE_READ_KEYS"]["valueFrom"]["secretKeyRef"] == {
            "name": f"penelope-{name}", "key": "PENELOPE_READ_KEYS", "optional": True,
        }
    assert "console.yaml:kind: Deployment" in GUIDE and "## The console on Kubernetes" in GUIDE


def test_the_console_s_read_key_holds_across_exports_and_joins_the_persona_s_own(tmp_path):
    """Derived from the persona's key: the same while that key stays, so an
    export applied again does not rotate it. A persona's own read keys stay
    in its Secret, beside the console's, never in the manifest's env."""
    personas = readme_personas()
    bob = personas["personas"][1]
    own_read_key = "bob-reader-" + "0" * 32
    bob["env"] = {"PENELOPE_KEY": "bob-key-0123456789", "PENELOPE_READ_KEYS": own_read_key}

    def bob_secret(*args: str) -> tuple[dict, list[dict]]:
        done = export(tmp_path, personas, *args)
        assert done.returncode == 0, done.stderr
        docs = [doc for doc in yaml.safe_load_all(done.stdout) if doc]
        return by_kind(docs, "Secret")["penelope-bob"]["stringData"], docs

    first, docs = bob_secret()
    again, _ = bob_secret()
    assert first == again and first["PENELOPE_READ_KEYS"] == f"{own_read_key} {first['CONSOLE_READ_KEY']}"
    assert own_read_key not in json.dumps(by_kind(docs, "StatefulSet"))
    alone, docs = bob_secret("--no-console")
    assert alone == {"PENELOPE_KEY": "bob-key-0123456789", "PENELOPE_READ_KEYS": own_read_key}
    assert not [doc for doc in docs if doc["metadata"]["name"] == "penelope-console"]


def test_the_console_uses_the_waker_s_key_and_a_persona_cannot_take_its_name(tmp_path):
    (tmp_path / "waker.key").write_text("the-waker-key-0123456789\n")
    done = export(tmp_path, readme_personas())
    docs = [doc for doc in yaml.safe_load_all(done.stdout) if doc]
    assert by_kind(docs, "Secret")["penelope-console"]["stringData"] == {"WAKER_KEY": "the-waker-key-0123456789"}
    clash = {"personas": [{"name": "console", "store": "stores/console", "port": 5001}]}
    refused = export(tmp_path, clash)
    assert refused.returncode != 0 and "the console's own name" in refused.stderr
    assert export(tmp_path, clash, "--no-console").returncode == 0
