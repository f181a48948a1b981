"""Each plugin action's parameters in the OpenAPI document.

The plugin routes take any family's parameters, so their request body is a
free-form object; this hook adds one component schema per action
(`web.open.params`, …), drawn from the serializer the action validates
with, and lists them on the plugin operations under `x-actions`, so a client
generator or a reader finds every action's parameters, types, limits and
defaults in the document."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from plugins.framework import families

PLUGIN_PATH = "/api/v1/{page_id}/plugin/{family}/{action}"


def action_parameters(result: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
    """Postprocessing hook: the actions' parameter schemas as components."""
    components = result.setdefault("components", {}).setdefault("schemas", {})
    actions = {}
    for family in families().values():
        for action in family.actions.values():
            name = f"{action.family}.{action.name}.params"
            described = params_schema(action.params) if action.params else {"type": "object", "properties": {}}
            described["description"] = (action.run.__doc__ or f"The parameters of {action.route}.").strip().split("\n\n")[0]
            components[name] = described
            actions[action.route] = {"$ref": f"#/components/schemas/{name}"}
    for operation in result.get("paths", {}).get(PLUGIN_PATH, {}).values():
        operation["x-actions"] = actions
    return result


def params_schema(shape: type[serializers.Serializer]) -> dict[str, Any]:
    return serializer_schema(shape())


def serializer_schema(serializer: serializers.Serializer) -> dict[str, Any]:
    properties = {name: field_schema(field) for name, field in serializer.fields.items()}
    required = [name for name, field in serializer.fields.items() if field.required]
    described: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        described["required"] = required
    return described


def field_schema(field: serializers.Field) -> dict[str, Any]:
    """A DRF field as an OpenAPI 3.0 schema, for the kinds the actions use."""
    if isinstance(field, serializers.Serializer):
        described = serializer_schema(field)
    elif isinstance(field, serializers.ListField):
        described = {"type": "array", "items": field_schema(field.child)}
        bounds(described, field, "min_length", "minItems", "max_length", "maxItems")
    elif isinstance(field, serializers.MultipleChoiceField):
        described = {"type": "array", "items": {"enum": list(field.choices)}, "uniqueItems": True}
    elif isinstance(field, serializers.ChoiceField):
        described = {"enum": list(field.choices)}
    elif isinstance(field, serializers.DictField):
        described = {"type": "object", "additionalProperties": field_schema(field.child)}
    elif isinstance(field, serializers.BooleanField):
        described = {"type": "boolean"}
    elif isinstance(field, serializers.IntegerField):
        described = {"type": "integer"}
        bounds(described, field, "min_value", "minimum", "max_value", "maximum")
    elif isinstance(field, serializers.FloatField):
        described = {"type": "number"}
        bounds(described, field, "min_value", "minimum", "max_value", "maximum")
    elif isinstance(field, serializers.JSONField):
        described = {}
    elif isinstance(field, serializers.CharField):
        described = {"type": "string"}
        if isinstance(field, serializers.URLField):
            described["format"] = "uri"
        bounds(described, field, "min_length", "minLength", "max_length", "maxLength")
        if not field.allow_blank and "minLength" not in described:
            described["minLength"] = 1
    else:
        described = {}
    if field.default is not serializers.empty and not callable(field.default):
        default = field.default
        described["default"] = sorted(default) if isinstance(default, set) else default
    if getattr(field, "allow_null", False):
        described["nullable"] = True
    if field.help_text:
        described["description"] = str(field.help_text)
    return described


def bounds(described: dict[str, Any], field: serializers.Field, low: str, low_key: str, high: str, high_key: str) -> None:
    for attribute, key in ((low, low_key), (high, high_key)):
        value = getattr(field, attribute, None)
        if value is not None:
            described[key] = value
