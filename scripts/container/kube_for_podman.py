"""The resources `manage.py waker export-kubernetes` writes, as the kinds
`podman kube play` runs: a local check of the pod spec, not a cluster.

    kube_for_podman.py HOST_PORT < export.yaml > bundle.json

The bundle is JSON: `play`, the YAML for `podman kube play`; `secrets`, each
Secret as the JSON `podman secret create` takes; `workloads`, the Deployments
podman must then run; `left_out`, the resources it will not; `probes`, the
probes taken out; `expect`, what the pod's security context must put in
force.

podman runs Pods, Deployments and PersistentVolumeClaims, and skips every
other kind of a multi-document file without a word (exit 0). So:

- a Secret is not played but made with `podman secret create` from a JSON
  object of its keys and their base64 values (podman 4.3 plays a Secret, but
  a container's secretKeyRef then cannot read it, "not valid JSON", and an
  optional key it cannot read is left out without a word);
- a StatefulSet becomes a Deployment of one replica with the same pod
  template, and each of its volumeClaimTemplates a PersistentVolumeClaim named
  as the StatefulSet's first pod would have it (`<claim>-<statefulset>-0`);
- the pod's emptyDir volumes are named after the workload (podman makes each
  a named volume, and `tmp` or `home` alone could be someone else's);
- the probes are left out, and listed: the kubelet makes a probe's HTTP
  request itself, while podman turns an httpGet probe into a health check
  that runs `curl` in the container (which the image has not) and restarts
  the container when it fails. The image's own HEALTHCHECK asks the same
  route, and the check calls it through the published port;
- the worker's port is published on 127.0.0.1:HOST_PORT (the cluster would
  reach it through the Service) and the image is never pulled (it is the one
  just built);
- Namespace, Service, NetworkPolicy and KEDA's objects are left out, and
  listed: nothing here routes, scales or filters traffic.

Runs in the image, whose venv has PyYAML.
"""

from __future__ import annotations

import base64
import copy
import json
import sys
from typing import Any

import yaml

PLAYED = {"PersistentVolumeClaim", "Deployment", "Pod"}
UNITS = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "K": 10**3, "M": 10**6, "G": 10**9}


def named_ports(container: dict[str, Any]) -> dict[str, int]:
    return {port["name"]: port["containerPort"] for port in container.get("ports", []) if "name" in port}


PROBES = ("startupProbe", "readinessProbe", "livenessProbe")


def without_probes(container: dict[str, Any]) -> list[str]:
    """Takes the probes out; answers each as `<probe> GET <path> on <port number>`."""
    ports = named_ports(container)
    taken = []
    for probe in PROBES:
        spec = container.pop(probe, None)
        if spec is None:
            continue
        target = spec.get("httpGet") or spec.get("tcpSocket") or {}
        port = ports.get(target.get("port"), target.get("port"))
        taken.append(f"{probe} GET {target.get('path', '')} on {port}")
    return taken


def secret_data(document: dict[str, Any]) -> dict[str, str]:
    """Its keys and base64 values, stringData merged into data as the API server does."""
    data = dict(document.get("data") or {})
    for key, value in (document.get("stringData") or {}).items():
        data[key] = base64.b64encode(value.encode()).decode()
    return data


def quantity(text: str) -> int:
    for suffix, factor in UNITS.items():
        if str(text).endswith(suffix):
            return int(float(str(text)[: -len(suffix)]) * factor)
    return int(text)


def expectations(statefulset: dict[str, Any]) -> dict[str, Any]:
    pod = statefulset["spec"]["template"]["spec"]
    [container] = [c for c in pod["containers"] if c["name"] == "worker"]
    context = container.get("securityContext", {})
    return {
        "uid": pod["securityContext"]["runAsUser"],
        "gid": pod["securityContext"]["runAsGroup"],
        "read_only_root": bool(context.get("readOnlyRootFilesystem")),
        "no_new_privileges": context.get("allowPrivilegeEscalation") is False,
        "drop_all": "ALL" in context.get("capabilities", {}).get("drop", []),
        "memory_bytes": quantity(container["resources"]["limits"]["memory"]),
        "seccomp": pod["securityContext"].get("seccompProfile", {}).get("type"),
    }


def deployment(statefulset: dict[str, Any], host_port: int, probes: list[str]) -> list[dict[str, Any]]:
    name = statefulset["metadata"]["name"]
    spec = statefulset["spec"]
    template = copy.deepcopy(spec["template"])
    pod = template["spec"]
    claims = []
    for claim in spec.get("volumeClaimTemplates", []):
        claim_name = f"{claim['metadata']['name']}-{name}-0"
        claims.append(
            {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": claim_name}, "spec": claim["spec"]}
        )
        pod.setdefault("volumes", []).append(
            {"name": claim["metadata"]["name"], "persistentVolumeClaim": {"claimName": claim_name}}
        )
    renamed = {}
    for volume in pod.get("volumes", []):
        if "emptyDir" in volume:
            renamed[volume["name"]] = volume["name"] = f"{name}-{volume['name']}"
    for container in pod["containers"]:
        for mount in container.get("volumeMounts", []):
            mount["name"] = renamed.get(mount["name"], mount["name"])
        probes += without_probes(container)
        container["imagePullPolicy"] = "Never"
        for port in container.get("ports", []):
            port.update({"hostIP": "127.0.0.1", "hostPort": host_port})
    return claims + [
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": name, "labels": statefulset["metadata"].get("labels", {})},
            "spec": {"replicas": 1, "selector": spec["selector"], "template": template},
        }
    ]


def convert(documents: list[dict[str, Any]], host_port: int) -> dict[str, Any]:
    played: list[dict[str, Any]] = []
    bundle: dict[str, Any] = {"secrets": {}, "workloads": [], "left_out": [], "probes": [], "expect": {}}
    for document in documents:
        kind, name = document["kind"], document["metadata"]["name"]
        if kind == "StatefulSet":
            played += deployment(document, host_port, bundle["probes"])
            bundle["workloads"].append(name)
            bundle["expect"][name] = expectations(document)
        elif kind == "Secret":
            bundle["secrets"][name] = secret_data(document)
        elif kind in PLAYED:
            document = copy.deepcopy(document)
            document["metadata"].pop("namespace", None)
            played.append(document)
        else:
            bundle["left_out"].append(f"{kind}/{name}")
    # Claims before the workload that mounts them.
    played.sort(key=lambda document: document["kind"] in ("Deployment", "Pod"))
    bundle["play"] = yaml.safe_dump_all(played, sort_keys=False)
    bundle["played"] = [f"{document['kind']}/{document['metadata']['name']}" for document in played]
    return bundle


def main() -> None:
    host_port = int(sys.argv[1])
    documents = [document for document in yaml.safe_load_all(sys.stdin) if document]
    bundle = convert(documents, host_port)
    if not bundle["workloads"]:
        raise SystemExit("kube_for_podman: the export holds no StatefulSet")
    json.dump(bundle, sys.stdout)


if __name__ == "__main__":
    main()
