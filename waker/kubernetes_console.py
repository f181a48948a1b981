"""The fleet console in an export (`waker export-kubernetes`, unless
`--no-console`): on a cluster no waker runs it, so it is a Deployment of its
own (`manage.py console`, console/fleet_http.py) that reads each persona
through its worker's Service with a read key.

`console.yaml` holds its ConfigMap (the fleet file: each persona's Service
URL and the variable holding its read key), its Secret (WAKER_KEY, the
sign-in key), its Service, its NetworkPolicy and its Deployment. Each
persona's Secret gains CONSOLE_READ_KEY, which the console reads, and the same
key among its PENELOPE_READ_KEYS, which the worker takes. The read key is
derived from the persona's PENELOPE_KEY (an HMAC, which gives nothing of
that key back), so exporting again gives the same one while the key stays.
Like the persona's keys, the console's are written into the Secrets of the
overlay, which is why its files are their owner's only.
"""

from __future__ import annotations

import copy
import hashlib
import hmac
import json
import secrets
from pathlib import Path
from typing import Any

from waker.kubernetes import BASE_NAME, CONTAINER, ExportedPersona, base_documents, resource_name, service_url
from waker.personas import PersonasInvalid

NAME = f"{BASE_NAME}-console"
PORT = 5200
FLEET_DIR = "/etc/penelope"
FLEET_FILE = "fleet.json"
# Its sign-in key, in its own Secret; each persona's read key, in the persona's.
KEY_SETTING = "WAKER_KEY"
READ_KEY = "CONSOLE_READ_KEY"
READ_KEYS = "PENELOPE_READ_KEYS"
PYTHON = "/app/.venv/bin/python"  # the image's (Containerfile)
SELECTOR = {"app.kubernetes.io/name": BASE_NAME, "app.kubernetes.io/instance": NAME}
LABELS = {**SELECTOR, "app.kubernetes.io/component": "console"}
# A Django process and an HTTP client: about 70 MB resident.
RESOURCES = {
    "requests": {"cpu": "50m", "memory": "128Mi", "ephemeral-storage": "64Mi"},
    "limits": {"cpu": "500m", "memory": "256Mi", "ephemeral-storage": "256Mi"},
}


def read_key(full_key: str) -> str:
    """The console's read key of a persona whose PENELOPE_KEY is `full_key`
    (its first key, during a rotation): 64 hex characters."""
    first = full_key.split()[0]
    return hmac.new(first.encode(), b"penelope console read key", hashlib.sha256).hexdigest()


def read_key_env(persona: str) -> str:
    """The console's variable holding the persona's read key: READ_KEY_<NAME>."""
    return "READ_KEY_" + persona.upper().replace("-", "_")


def sign_in_key(configured: str, key_file: Path) -> str:
    """The console's WAKER_KEY: the one set for the exporter, else the waker's
    own (`waker.key` beside the personas file), else a new one."""
    if configured:
        return configured
    try:
        kept = key_file.read_text().strip()
    except OSError:
        kept = ""
    return kept or secrets.token_urlsafe(32)


def fleet_file(personas: list[ExportedPersona], namespace: str) -> dict[str, Any]:
    """The console's fleet file (console/fleet_file.py)."""
    return {
        "personas": [
            {
                "name": persona.name,
                "url": service_url(resource_name(persona.name), namespace),
                "read_key_env": read_key_env(persona.name),
                "mode": persona.cluster_mode,
            }
            for persona in personas
        ]
    }


def hardened(base: list[dict[str, Any]]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The worker's pod and container security contexts, from the base: the console runs as the same user, as tightly."""
    [stateful] = [document for document in base if document["kind"] == "StatefulSet"]
    pod = stateful["spec"]["template"]["spec"]
    [container] = [c for c in pod["containers"] if c["name"] == CONTAINER]
    return copy.deepcopy(pod["securityContext"]), copy.deepcopy(container["securityContext"])


def deployment(personas: list[ExportedPersona], *, namespace: str, image: str, base: list[dict[str, Any]]) -> dict[str, Any]:
    pod_context, container_context = hardened(base)

    def probe(**timing: int) -> dict[str, Any]:
        # The sign-in page: it answers without a key, once the console serves.
        return {"httpGet": {"path": "/console/sign-in", "port": "http"}, "timeoutSeconds": 2, **timing}

    env = [
        {"name": "CONSOLE_HOST", "value": "0.0.0.0"},
        {"name": "CONSOLE_PORT", "value": str(PORT)},
        {"name": "CONSOLE_FLEET", "value": f"{FLEET_DIR}/{FLEET_FILE}"},
        {"name": KEY_SETTING, "valueFrom": {"secretKeyRef": {"name": NAME, "key": KEY_SETTING}}},
        *(
            {
                "name": read_key_env(persona.name),
                "valueFrom": {"secretKeyRef": {"name": resource_name(persona.name), "key": READ_KEY}},
            }
            for persona in personas
        ),
    ]
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": NAME, "namespace": namespace, "labels": dict(LABELS)},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": dict(SELECTOR)},
            "template": {
                "metadata": {"labels": dict(LABELS)},
                "spec": {
                    "automountServiceAccountToken": False,
                    "enableServiceLinks": False,
                    "securityContext": pod_context,
                    "containers": [
                        {
                            "name": "console",
                            "image": image,
                            "imagePullPolicy": "Always",
                            "command": [PYTHON, "manage.py", "console"],
                            "ports": [{"name": "http", "containerPort": PORT, "protocol": "TCP"}],
                            "env": env,
                            "resources": copy.deepcopy(RESOURCES),
                            "readinessProbe": probe(periodSeconds=5),
                            "livenessProbe": probe(periodSeconds=10, failureThreshold=3),
                            "securityContext": container_context,
                            "volumeMounts": [
                                {"name": "fleet", "mountPath": FLEET_DIR, "readOnly": True},
                                {"name": "tmp", "mountPath": "/tmp"},
                            ],
                        }
                    ],
                    "volumes": [
                        {"name": "fleet", "configMap": {"name": NAME}},
                        {"name": "tmp", "emptyDir": {"sizeLimit": "64Mi"}},
                    ],
                },
            },
        },
    }


def console_documents(
    personas: list[ExportedPersona], *, namespace: str, image: str, key: str, base: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    def meta() -> dict[str, Any]:
        return {"name": NAME, "namespace": namespace, "labels": dict(LABELS)}

    fleet = json.dumps(fleet_file(personas, namespace))
    return [
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta(), "data": {FLEET_FILE: fleet}},
        {"apiVersion": "v1", "kind": "Secret", "metadata": meta(), "type": "Opaque", "stringData": {KEY_SETTING: key}},
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": meta(),
            "spec": {
                "selector": dict(SELECTOR),
                "ports": [{"name": "http", "port": PORT, "targetPort": "http", "protocol": "TCP"}],
            },
        },
        {
            "apiVersion": "networking.k8s.io/v1",
            "kind": "NetworkPolicy",
            "metadata": meta(),
            "spec": {
                "podSelector": {"matchLabels": dict(SELECTOR)},
                "policyTypes": ["Ingress"],
                "ingress": [{"ports": [{"port": PORT, "protocol": "TCP"}]}],
            },
        },
        deployment(personas, namespace=namespace, image=image, base=base),
    ]


def give_read_key(secret: dict[str, Any]) -> None:
    """A persona's Secret with the console's read key, also among the keys the worker reads."""
    data = secret["stringData"]
    key = read_key(data["PENELOPE_KEY"])
    data[READ_KEY] = key
    keys = data.get(READ_KEYS, "").split()
    data[READ_KEYS] = " ".join(keys if key in keys else [*keys, key])
    secret["stringData"] = dict(sorted(data.items()))


def with_console(
    files: dict[str, list[dict[str, Any]]], personas: list[ExportedPersona], *, namespace: str, image: str, key: str
) -> dict[str, list[dict[str, Any]]]:
    """The overlay of `kubernetes.export` with the console: `console.yaml`, and
    each persona's Secret given the console's read key."""
    for persona in personas:
        if resource_name(persona.name) == NAME:
            raise PersonasInvalid(
                f"Persona {persona.name} would be {NAME} on Kubernetes, the console's own name; rename it, "
                "or export with --no-console."
            )
    for persona in personas:
        for document in files[f"{persona.name}.yaml"]:
            if document["kind"] == "Secret":
                give_read_key(document)
    kustomization = files.pop("kustomization.yaml")
    files["console.yaml"] = console_documents(personas, namespace=namespace, image=image, key=key, base=base_documents())
    kustomization[0]["resources"].append("console.yaml")
    files["kustomization.yaml"] = kustomization
    return files
