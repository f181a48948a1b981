"""The fleet file of a console that runs on its own (`manage.py console`, on
Kubernetes): each persona's name, the URL of its worker's Service, and the
environment variable that holds the read key the console reads it with.

    {"personas": [
      {"name": "alice", "url": "http://penelope-alice.penelope.svc.cluster.local:5000",
       "read_key_env": "READ_KEY_ALICE", "mode": "sleepy"}]}

The keys are not in the file: on Kubernetes it is a ConfigMap, and each key
comes from its persona's Secret into the console's environment
(`waker export-kubernetes` writes both, waker/kubernetes_console.py).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from rest_framework import serializers

from waker.personas import ALWAYS, NAME_PATTERN, NAME_RULE, SLEEPY, first_error

ENV_NAME = r"^[A-Za-z_][A-Za-z0-9_]{0,127}$"


class FleetInvalid(ValueError):
    """The fleet file cannot be used; the message says why, for the operator."""


@dataclass(frozen=True)
class ServicePersona:
    name: str
    url: str  # the worker's base URL, without a trailing slash
    read_key: str = field(repr=False)
    mode: str = SLEEPY

    @property
    def api_url(self) -> str:
        return self.url + "/api/v1"


class FleetPersonaSerializer(serializers.Serializer):
    name = serializers.RegexField(NAME_PATTERN, error_messages={"invalid": NAME_RULE})
    url = serializers.CharField(max_length=2000, help_text="The worker's Service: http://host:port")
    read_key_env = serializers.RegexField(
        ENV_NAME, error_messages={"invalid": "The name of an environment variable: A-Z, a-z, 0-9 and '_', not a digit first."}
    )
    mode = serializers.ChoiceField(choices=[SLEEPY, ALWAYS], default=SLEEPY)

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, Mapping):
            unknown = sorted(set(data) - set(self.fields))
            if unknown:
                raise serializers.ValidationError({unknown[0]: [f"Not a field of a persona: use {', '.join(self.fields)}."]})
        return super().to_internal_value(data)

    def validate_url(self, url: str) -> str:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise serializers.ValidationError("An http:// or https:// URL with a host, such as http://penelope-alice:5000.")
        if parts.username or parts.password or parts.query or parts.fragment or parts.path not in ("", "/"):
            raise serializers.ValidationError("Only the scheme, the host and the port: the console adds /api/v1/... itself.")
        try:
            parts.port  # noqa: B018 - raises on a port out of range
        except ValueError:
            raise serializers.ValidationError("The port is not a port (1 to 65535).") from None
        return url.rstrip("/")


class FleetFileSerializer(serializers.Serializer):
    personas = FleetPersonaSerializer(many=True, allow_empty=False)


def load_fleet(path: Path, environ: Mapping[str, str] = os.environ) -> list[ServicePersona]:
    """The fleet file's personas with their read keys from `environ`, or
    FleetInvalid with the first thing wrong."""
    try:
        raw = json.loads(path.read_text())
    except OSError as error:
        raise FleetInvalid(f"Cannot read the fleet file {path}: {error.strerror}.") from None
    except ValueError as error:
        raise FleetInvalid(f"The fleet file {path} is not valid JSON: {error}.") from None
    checked = FleetFileSerializer(data=raw)
    if not checked.is_valid():
        raise FleetInvalid(f"The fleet file {path} is invalid: {first_error(checked.errors)}")
    personas, seen = [], set()
    for index, item in enumerate(checked.validated_data["personas"]):
        if item["name"] in seen:
            raise FleetInvalid(f"The fleet file {path} names persona {item['name']} twice.")
        seen.add(item["name"])
        key = environ.get(item["read_key_env"], "").strip()
        if not key:
            raise FleetInvalid(
                f"The fleet file {path} is invalid: personas[{index}].read_key_env: {item['read_key_env']} is not set "
                f"in the console's environment; it holds persona {item['name']}'s read key (one of its PENELOPE_READ_KEYS)."
            )
        personas.append(ServicePersona(name=item["name"], url=item["url"], read_key=key, mode=item["mode"]))
    return personas
