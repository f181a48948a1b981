"""The personas the waker runs, loaded from one JSON file at start.

A file rather than database rows: the waker has no store of its own (each
worker's database belongs to that worker), and a file can be reviewed,
versioned and deployed with the rest of a host's configuration. Its format is
in docs/reference/WAKER_API.md#the-personas-file.
"""

from __future__ import annotations

import json
import os
import secrets
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rest_framework import serializers

SLEEPY = "sleepy"
ALWAYS = "always"
WORKER_HOST = "127.0.0.1"
# Set from the persona's own fields, so a persona's `env` may not set them.
ENV_FROM_FIELDS = ("PENELOPE_STORE", "PENELOPE_HOST", "PENELOPE_PORT")


class PersonasInvalid(ValueError):
    """The personas file cannot be used; the message says why, for the operator."""


@dataclass(frozen=True)
class Persona:
    name: str
    store: Path
    port: int
    mode: str
    idle_timeout_s: float
    recycle_s: float
    # The worker's own settings (PENELOPE_PROXY, MAX_PAGES, ...), on top of the waker's environment.
    env: dict[str, str] = field(default_factory=dict)
    # The worker's PENELOPE_KEY as the worker gets it: one key, or two during a
    # rotation; the waker reads the worker's activity with the first.
    key: str = ""

    @property
    def reading_key(self) -> str:
        keys = self.key.split()
        return keys[0] if keys else ""

    @property
    def accepted_keys(self) -> list[str]:
        """Every key the worker takes, full or read (PENELOPE_READ_KEYS, the
        persona's or the waker's environment, which its worker inherits): the
        waker's proxy lets a request through with any of them."""
        read = self.env.get("PENELOPE_READ_KEYS") or os.environ.get("PENELOPE_READ_KEYS", "")
        return self.key.split() + read.split()

    @property
    def base_url(self) -> str:
        return f"http://{WORKER_HOST}:{self.port}"

    @property
    def api_url(self) -> str:
        return self.base_url + "/api/v1"


# A persona's name, here and in a console's fleet file (console/fleet_file.py).
NAME_PATTERN = r"^[a-z0-9][a-z0-9_-]{0,31}$"
NAME_RULE = "A persona's name is 1 to 32 of a-z, 0-9, '_' and '-', starting with a letter or digit."


class PersonaSerializer(serializers.Serializer):
    name = serializers.RegexField(NAME_PATTERN, error_messages={"invalid": NAME_RULE})
    store = serializers.CharField()
    port = serializers.IntegerField(min_value=1, max_value=65535)
    mode = serializers.ChoiceField(choices=[SLEEPY, ALWAYS], default=SLEEPY)
    idle_timeout_s = serializers.FloatField(default=60.0)
    recycle_s = serializers.FloatField(default=6 * 3600.0)
    env = serializers.DictField(child=serializers.CharField(allow_blank=True), default=dict)

    def validate_idle_timeout_s(self, value: float) -> float:
        return _positive(value)

    def validate_recycle_s(self, value: float) -> float:
        return _positive(value)

    def validate_env(self, value: dict[str, str]) -> dict[str, str]:
        taken = sorted(set(value) & set(ENV_FROM_FIELDS))
        if taken:
            raise serializers.ValidationError(f"{', '.join(taken)} come from the persona's store and port fields.")
        return value


class PersonasFileSerializer(serializers.Serializer):
    personas = PersonaSerializer(many=True, allow_empty=False)


def _positive(value: float) -> float:
    if not value > 0 or value == float("inf"):
        raise serializers.ValidationError("A number of seconds, more than 0.")
    return value


def checked_personas(path: Path) -> list[dict[str, Any]]:
    """The personas of the file, each checked by PersonaSerializer, or
    PersonasInvalid with the first thing wrong."""
    try:
        raw = json.loads(path.read_text())
    except OSError as error:
        raise PersonasInvalid(f"Cannot read the personas file {path}: {error.strerror}.") from None
    except ValueError as error:
        raise PersonasInvalid(f"The personas file {path} is not valid JSON: {error}.") from None
    checked = PersonasFileSerializer(data=raw)
    if not checked.is_valid():
        raise PersonasInvalid(f"The personas file {path} is invalid: {first_error(checked.errors)}")
    return checked.validated_data["personas"]


def load_personas(path: Path, *, waker_port: int) -> list[Persona]:
    """Read and check the personas file. Relative store paths are relative to
    the file's directory. A persona without PENELOPE_KEY in its `env` uses the
    key in its store, which is generated there when missing."""
    personas = [_persona(item, path.parent) for item in checked_personas(path)]
    _check_distinct(personas, waker_port)
    return personas


def _persona(item: dict[str, Any], base: Path) -> Persona:
    store = (base / item["store"]).resolve()
    env = dict(item["env"])
    return Persona(
        name=item["name"],
        store=store,
        port=item["port"],
        mode=item["mode"],
        idle_timeout_s=item["idle_timeout_s"],
        recycle_s=item["recycle_s"],
        env=env,
        key=env.get("PENELOPE_KEY") or stored_key(store),
    )


def stored_key(store: Path) -> str:
    """The key in the store, as the worker itself reads it; generated (and
    kept there, readable by the owner only) when the store has none."""
    key_file = store / "key"
    try:
        key = key_file.read_text().strip()
    except FileNotFoundError:
        key = ""
    if key:
        return key
    store.mkdir(parents=True, exist_ok=True)
    key = secrets.token_urlsafe(32)
    fd = os.open(key_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(key + "\n")
    return key


def _check_distinct(personas: list[Persona], waker_port: int) -> None:
    for what, value_of in (("name", lambda p: p.name), ("port", lambda p: p.port), ("store", lambda p: p.store)):
        seen: set[object] = set()
        for persona in personas:
            value = value_of(persona)
            if value in seen:
                raise PersonasInvalid(f"Two personas have the {what} {value}; each needs its own.")
            seen.add(value)
    for persona in personas:
        if persona.port == waker_port:
            raise PersonasInvalid(f"Persona {persona.name} has port {waker_port}, the waker's own port.")


def first_error(errors: Any, where: str = "") -> str:
    """DRF's nested errors as one sentence naming the field: `personas[1].port: ...`."""
    if isinstance(errors, dict):  # by field name, or by index for a list's items
        name, inner = next(iter(errors.items()))
        if isinstance(name, int):
            label = f"{where}[{name}]"
        else:
            label = where if name == "non_field_errors" else (f"{where}.{name}" if where else name)
        return first_error(inner, label)
    if isinstance(errors, list):
        for index, inner in enumerate(errors):
            if inner:
                if isinstance(inner, (dict, list)):
                    return first_error(inner, f"{where}[{index}]")
                return f"{where}: {inner}"
    return f"{where}: {errors}"
