"""`manage.py waker export-kubernetes`: the personas file as Kubernetes
manifests, so one file describes a fleet on one host (the waker) or on a
cluster (docs/guides/SCALING.md).

Every persona gets the base in deploy/kubernetes/base (its StatefulSet,
Service, Secret and NetworkPolicy) under its own name, with its settings: its
`env` in the container, the secret ones (key, webhook secret, proxy,
credentials key) in its Secret, its idle timeout as IDLE_TIMEOUT_S. A
`sleepy` persona also gets the KEDA objects that wake it on a request (an
HTTPScaledObject of the HTTP add-on) and keep it up while the worker says it
must stay awake (a ScaledObject whose metrics-api trigger reads `stay_awake`
from its GET /api/v1/activity); an `always` one is one replica, without
them, and so is a sleepy one whose store here has schedules (`cluster_mode`).

Pure functions of the file and the base, apart from reading a key the
persona's store already holds: nothing here talks to a cluster.
"""

from __future__ import annotations

import copy
import re
import secrets
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from core.awake import read_next_wake
from waker.personas import ALWAYS, SLEEPY, PersonasInvalid, checked_personas

BASE_DIR = Path(__file__).resolve().parent.parent / "deploy" / "kubernetes" / "base"
BASE_NAME = "penelope"
CONTAINER = "worker"
WORKER_PORT = 5000
DEFAULT_IMAGE = "penelope:1"
DEFAULT_DOMAIN = "penelope.internal"
# Where the HTTP add-on's external scaler listens, as its chart installs it.
HTTP_ADDON_SCALER = "keda-add-ons-http-external-scaler.keda:9090"
# A persona's settings that go in its Secret, not in the manifest's env.
SECRET_SETTINGS = (
    "PENELOPE_KEY", "WEBHOOK_SECRET", "PENELOPE_PROXY", "DJANGO_SECRET_KEY", "CREDENTIALS_KEY", "PENELOPE_READ_KEYS",
)
# The worker's defaults (penelope_site/settings.py) of what bounds its stop.
STOP_DEFAULTS = {"ACTION_TIMEOUT_S": 300.0, "CANCEL_GRACE_S": 5.0, "WEBHOOK_TIMEOUT_S": 10.0}
STOP_MARGIN_S = 30
# After stay_awake turns 0 (the idle timeout already ran out), KEDA waits this
# long before it scales the worker to zero.
COOLDOWN_S = 30
POLLING_S = 5
# The interceptor's limits on one request: a cold start (browser launch and
# migrations) and the answer of a plain call, which may run ACTION_TIMEOUT_S.
CONDITION_WAIT_S = 120
KUBERNETES_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


@dataclass(frozen=True)
class ExportedPersona:
    name: str
    mode: str
    idle_timeout_s: float
    env: dict[str, str] = field(default_factory=dict)
    store: Path | None = None

    @property
    def has_schedules(self) -> bool:
        """Its store on this host records a next wake: it has a schedule that is not paused."""
        return self.store is not None and read_next_wake(self.store) is not None

    @property
    def cluster_mode(self) -> str:
        """How it runs on a cluster: a sleepy persona with schedules runs
        always, for at zero replicas nothing reads its next wake (KEDA's
        triggers read a running worker, or wake it on a request)."""
        return ALWAYS if self.mode == SLEEPY and self.has_schedules else self.mode


def read_personas(path: Path) -> list[ExportedPersona]:
    """The personas file, checked as the waker checks it (ports and stores
    aside: on a cluster each worker has its own port and volume)."""
    personas = [
        ExportedPersona(
            name=item["name"],
            mode=item["mode"],
            idle_timeout_s=item["idle_timeout_s"],
            env=dict(item["env"]),
            store=(path.parent / item["store"]).resolve(),
        )
        for item in checked_personas(path)
    ]
    seen: dict[str, str] = {}
    for persona in personas:
        resource = resource_name(persona.name)
        if resource in seen:
            raise PersonasInvalid(
                f"Personas {seen[resource]} and {persona.name} would both be {resource} on Kubernetes "
                "(names there have '-' for '_'); rename one."
            )
        seen[resource] = persona.name
    return personas


def resource_name(persona: str) -> str:
    """`penelope-<persona>`, '_' as '-': a Kubernetes name (DNS label)."""
    return f"{BASE_NAME}-{persona.replace('_', '-')}".rstrip("-")


def namespace_name(namespace: str) -> str:
    if not KUBERNETES_NAME.match(namespace) or len(namespace) > 63:
        raise PersonasInvalid(
            f"The namespace {namespace!r} is not a Kubernetes name: 1 to 63 of a-z, 0-9 and '-', "
            "starting and ending with a letter or digit."
        )
    return namespace


def base_documents(base_dir: Path = BASE_DIR) -> list[dict[str, Any]]:
    """The base's resources, in its kustomization's order."""
    kustomization = yaml.safe_load((base_dir / "kustomization.yaml").read_text())
    return [
        document
        for resource in kustomization["resources"]
        for document in yaml.safe_load_all((base_dir / resource).read_text())
        if document
    ]


def _renamed(value: Any, name: str) -> Any:
    """The base with every reference to its own name (`penelope`) made `name`:
    metadata, labels, selectors, the service name, the secret references."""
    if isinstance(value, dict):
        return {key: name if item == BASE_NAME and key in ("name", "serviceName", "app.kubernetes.io/instance") else _renamed(item, name) for key, item in value.items()}
    if isinstance(value, list):
        return [_renamed(item, name) for item in value]
    return value


def _stored(store: Path | None, file_name: str) -> str:
    if store is None:
        return ""
    try:
        return (store / file_name).read_text().strip()
    except OSError:
        return ""


def persona_secrets(persona: ExportedPersona) -> dict[str, str]:
    """The persona's Secret: its secret settings from `env`, else the key (and
    webhook secret, and credentials key) its store already holds on this
    host, so a persona moved to a cluster keeps them; a key neither has is generated (a sleepy
    persona's KEDA trigger needs it to read the worker's activity)."""
    found = {name: persona.env[name] for name in SECRET_SETTINGS if persona.env.get(name)}
    found.setdefault("PENELOPE_KEY", _stored(persona.store, "key") or secrets.token_urlsafe(32))
    webhook_secret = _stored(persona.store, "webhook_secret")
    if webhook_secret:
        found.setdefault("WEBHOOK_SECRET", webhook_secret)
    # The key that opens its credentials' seals: without it, a store copied
    # to the cluster would hold credentials no worker there can open.
    credentials_key = _stored(persona.store, "credentials_key")
    if credentials_key:
        found.setdefault("CREDENTIALS_KEY", credentials_key)
    return dict(sorted(found.items()))


def grace_period_s(env: dict[str, str]) -> int:
    """How long the worker may take to stop: the call in hand, the cancelled
    jobs' grace, a webhook POST in flight, and a margin for the browser's close."""
    total = sum(float(env.get(name) or default) for name, default in STOP_DEFAULTS.items())
    return int(total) + STOP_MARGIN_S


def _set_env(container: dict[str, Any], name: str, value: str) -> None:
    for item in container["env"]:
        if item["name"] == name:
            item.clear()
            item.update({"name": name, "value": value})
            return
    container["env"].append({"name": name, "value": value})


def persona_documents(
    persona: ExportedPersona, *, namespace: str, image: str, domain: str, base: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    name = resource_name(persona.name)
    documents = [_renamed(copy.deepcopy(document), name) for document in base]
    for document in documents:
        document["metadata"]["namespace"] = namespace
        document["metadata"].setdefault("labels", {})["penelope.dev/persona"] = persona.name
        if document["kind"] == "Secret":
            document["stringData"] = persona_secrets(persona)
        if document["kind"] == "StatefulSet":
            spec = document["spec"]
            pod = spec["template"]["spec"]
            [container] = [c for c in pod["containers"] if c["name"] == CONTAINER]
            container["image"] = image
            _set_env(container, "IDLE_TIMEOUT_S", f"{persona.idle_timeout_s:g}")
            for key, value in sorted(persona.env.items()):
                if key not in SECRET_SETTINGS:
                    _set_env(container, key, value)
            pod["terminationGracePeriodSeconds"] = grace_period_s(persona.env)
            if persona.cluster_mode == SLEEPY:
                # KEDA owns the replica count (0 or 1): a re-apply must not reset it.
                spec.pop("replicas", None)
            else:
                spec["replicas"] = 1
    if persona.cluster_mode == SLEEPY:
        documents += keda_documents(persona, name=name, namespace=namespace, domain=domain)
    return documents


def service_url(name: str, namespace: str) -> str:
    """The worker's Service inside the cluster, past the add-on's interceptor:
    reading it never wakes a worker at zero replicas."""
    return f"http://{name}.{namespace}.svc.cluster.local:{WORKER_PORT}"


def persona_host(persona: str, domain: str) -> str:
    return f"{persona.replace('_', '-')}.{domain}"


def keda_documents(persona: ExportedPersona, *, name: str, namespace: str, domain: str) -> list[dict[str, Any]]:
    """A sleepy persona's KEDA objects: the add-on's HTTPScaledObject routes its
    host to the Service and wakes the worker on a request; one ScaledObject
    (the add-on's own is skipped) scales it 0..1 on that and on the worker's
    `stay_awake`, read with its key."""
    labels = {"app.kubernetes.io/name": BASE_NAME, "app.kubernetes.io/instance": name, "penelope.dev/persona": persona.name}
    target = {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": name}
    response_s = int(float(persona.env.get("ACTION_TIMEOUT_S") or STOP_DEFAULTS["ACTION_TIMEOUT_S"])) + STOP_MARGIN_S
    http_scaled_object = {
        "apiVersion": "http.keda.sh/v1alpha1",
        "kind": "HTTPScaledObject",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": labels,
            # The ScaledObject below is the only one on the StatefulSet: KEDA allows one per scale target.
            "annotations": {"httpscaledobject.keda.sh/skip-scaledobject-creation": "true"},
        },
        "spec": {
            "hosts": [persona_host(persona.name, domain)],
            "scaleTargetRef": {**target, "service": name, "port": WORKER_PORT},
            "replicas": {"min": 0, "max": 1},
            "scaledownPeriod": COOLDOWN_S,
            "timeouts": {"conditionWait": f"{CONDITION_WAIT_S}s", "responseHeader": f"{response_s}s"},
        },
    }
    trigger_authentication = {
        "apiVersion": "keda.sh/v1alpha1",
        "kind": "TriggerAuthentication",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": {"secretTargetRef": [{"parameter": "token", "name": name, "key": "PENELOPE_KEY"}]},
    }
    scaled_object = {
        "apiVersion": "keda.sh/v1alpha1",
        "kind": "ScaledObject",
        "metadata": {"name": f"{name}-awake", "namespace": namespace, "labels": labels},
        "spec": {
            "scaleTargetRef": target,
            "minReplicaCount": 0,
            "maxReplicaCount": 1,
            "pollingInterval": POLLING_S,
            "cooldownPeriod": COOLDOWN_S,
            "triggers": [
                {
                    # A request through the interceptor wakes the worker.
                    "type": "external-push",
                    "metadata": {"httpScaledObject": name, "scalerAddress": HTTP_ADDON_SCALER},
                },
                {
                    # 1 while the worker must stay awake: one replica; 0: none.
                    "type": "metrics-api",
                    "metadata": {
                        "url": f"{service_url(name, namespace)}/api/v1/activity",
                        "valueLocation": "stay_awake",
                        "targetValue": "1",
                        "activationTargetValue": "0",
                        "authMode": "bearer",
                    },
                    "authenticationRef": {"name": name},
                },
            ],
        },
    }
    return [http_scaled_object, trigger_authentication, scaled_object]


def namespace_document(namespace: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}


def export(
    personas: list[ExportedPersona], *, namespace: str, image: str = DEFAULT_IMAGE, domain: str = DEFAULT_DOMAIN
) -> dict[str, list[dict[str, Any]]]:
    """The overlay: file name -> its documents; `kustomization.yaml` lists the others."""
    namespace = namespace_name(namespace)
    base = base_documents()
    files: dict[str, list[dict[str, Any]]] = {"namespace.yaml": [namespace_document(namespace)]}
    for persona in personas:
        files[f"{persona.name}.yaml"] = persona_documents(
            persona, namespace=namespace, image=image, domain=domain, base=base
        )
    files["kustomization.yaml"] = [
        {
            "apiVersion": "kustomize.config.k8s.io/v1beta1",
            "kind": "Kustomization",
            "namespace": namespace,
            "resources": [file_name for file_name in files],
        }
    ]
    return files


def dump(documents: list[dict[str, Any]]) -> str:
    return yaml.safe_dump_all(documents, sort_keys=False, default_flow_style=False)


def write(files: dict[str, list[dict[str, Any]]], output: Path) -> list[Path]:
    """The overlay's files in `output` (made if missing); their Secrets make
    them private to their owner, as the waker's umask leaves every file."""
    output.mkdir(parents=True, exist_ok=True)
    written = []
    for file_name, documents in files.items():
        path = output / file_name
        path.write_text(dump(documents))
        path.chmod(0o600)
        written.append(path)
    return written


def as_one_stream(files: dict[str, list[dict[str, Any]]]) -> str:
    """Every resource as one multi-document YAML, for `kubectl apply -f -`."""
    return dump([document for file_name, documents in files.items() if file_name != "kustomization.yaml" for document in documents])


__all__ = ["ALWAYS", "SLEEPY", "ExportedPersona", "export", "read_personas", "write", "as_one_stream"]
