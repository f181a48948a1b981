"""Each plugin action's and primitive's parameters in the OpenAPI document.

The plugin and primitive routes take any action's parameters, so their
request body is a free-form object; this hook adds one component schema per
action (`web.open.params`, `primitive.goto.params`, …), drawn from the
serializer the action validates with, and lists them on the plugin and
primitive operations under `x-actions`, so a client generator or a reader
finds every action's parameters, types, limits, patterns and defaults in the
document. A rule between parameters (`quality` only with jpeg, `max_pages`
only with `next`, one of `selector` and `function`), which OpenAPI 3.0
cannot state, is said in the description of the parameters it binds. The primitive route's
body is `anyOf` the primitives' closed schemas."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from core.shapes import NavigationUrl
from plugins.framework import Action, families
from plugins.primitives import primitives

PLUGIN_PATH = "/api/v1/{page_id}/plugin/{family}/{action}"
PRIMITIVE_PATH = "/api/v1/{page_id}/primitive/{name}"


def action_parameters(result: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
    """Postprocessing hook: the actions' parameter schemas as components,
    listed under `x-actions` by route (`web/open`) on the plugin operations
    and by name (`goto`) on the primitive operation."""
    components = result.setdefault("components", {}).setdefault("schemas", {})
    plugin_actions = {
        action.route: component(components, action) for family in families().values() for action in family.actions.values()
    }
    primitive_actions = {name: component(components, action) for name, action in primitives.actions.items()}
    paths = result.get("paths", {})
    for path, actions in ((PLUGIN_PATH, plugin_actions), (PRIMITIVE_PATH, primitive_actions)):
        for operation in paths.get(path, {}).values():
            operation["x-actions"] = actions
    # Every primitive refuses a key it does not declare: the route's body is
    # one of theirs, not any object (the plugin route's stays open: a family
    # may take extras).
    if all(not action.extra_params for action in primitives.actions.values()):
        for operation in paths.get(PRIMITIVE_PATH, {}).values():
            body = operation.get("requestBody", {}).get("content", {}).get("application/json")
            if body is not None:
                body["schema"] = {"anyOf": list(primitive_actions.values())}
    return result


def component(components: dict[str, Any], action: Action) -> dict[str, str]:
    """Add the action's parameter schema to the components; answer its `$ref`."""
    name = f"{action.family}.{action.name}.params"
    closed = not action.extra_params
    described = params_schema(action.params, closed=closed) if action.params else {"type": "object", "properties": {}}
    if closed:
        described["additionalProperties"] = False
    described["description"] = (action.run.__doc__ or f"The parameters of {action.route}.").strip().split("\n\n")[0]
    components[name] = described
    return {"$ref": f"#/components/schemas/{name}"}


def params_schema(shape: type[serializers.Serializer], *, closed: bool = True) -> dict[str, Any]:
    """The serializer's parameters as a schema; `closed`, each object of it
    (nested ones too) says `additionalProperties: false`, as the action
    refuses a key it does not declare (plugins/declared.py). The top level
    of an action that takes extras is left open by the caller; its nested
    objects drop unknown keys (DRF's way), so they are left open too."""
    return serializer_schema(shape(), closed=closed)


def serializer_schema(serializer: serializers.Serializer, *, closed: bool = False) -> dict[str, Any]:
    properties = {name: field_schema(field, closed=closed) for name, field in serializer.fields.items()}
    required = [name for name, field in serializer.fields.items() if field.required]
    described: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        described["required"] = required
    if closed:
        described["additionalProperties"] = False
    return described


def field_schema(field: serializers.Field, *, closed: bool = False) -> dict[str, Any]:
    """A DRF field as an OpenAPI 3.0 schema, for the kinds the actions use;
    `closed`: a nested serializer's object refuses keys it does not declare."""
    if isinstance(field, serializers.ListSerializer):  # `many=True`
        described = {"type": "array", "items": serializer_schema(field.child, closed=closed)}
    elif isinstance(field, serializers.Serializer):
        described = serializer_schema(field, closed=closed)
    elif isinstance(field, serializers.ListField):
        described = {"type": "array", "items": field_schema(field.child, closed=closed)}
        bounds(described, field, "min_length", "minItems", "max_length", "maxItems")
    elif isinstance(field, serializers.MultipleChoiceField):
        # A name given twice counts once, so repeats are not refused: no uniqueItems.
        described = {"type": "array", "items": {"enum": list(field.choices)}}
        if not field.allow_empty:
            described["minItems"] = 1
    elif isinstance(field, serializers.ChoiceField):
        described = {"enum": list(field.choices)}
    elif isinstance(field, serializers.DictField):
        described = {"type": "object", "additionalProperties": field_schema(field.child, closed=closed)}
        if not field.allow_empty:
            described["minProperties"] = 1
        if getattr(field, "max_properties", None) is not None:
            described["maxProperties"] = field.max_properties
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
        # A URL has its pattern (core.shapes.Url), not `format: uri`: RFC 3986
        # refuses what the server takes (an international host, a `|`).
        described = {"type": "string"}
        if not field.trim_whitespace:
            bounds(described, field, "min_length", "minLength", "max_length", "maxLength")
            if not field.allow_blank and "minLength" not in described:
                described["minLength"] = 1
        if getattr(field, "schema_pattern", None):
            described["pattern"] = field.schema_pattern  # core.shapes.Text and Url
    else:
        described = {}
    notes = [str(field.help_text)] if field.help_text else []
    if isinstance(field, NavigationUrl):
        notes.append(
            "An http, https, ftp or ftps URL whose host is at most 253 characters: any name a browser takes "
            "(`localhost.`, `intranet`), or an address (`127.1` is 127.0.0.1, as browsers read it; a host that "
            "ends in a number must be a valid IPv4 address). Whether the browser may reach it is the egress "
            "guard's to judge (BROWSER_REFUSE_PRIVATE)."
        )
    elif isinstance(field, serializers.URLField):
        notes.append("An http, https, ftp or ftps URL whose host is at most 253 characters.")
    if isinstance(field, serializers.CharField) and field.trim_whitespace:
        # A plain CharField (a family of the user's own) trims before it checks:
        # its length limits hold for what remains, which no keyword can say.
        low = field.min_length or (0 if field.allow_blank else 1)
        high = f"at most {field.max_length}" if field.max_length is not None else "any number of"
        notes.append(
            "Surrounding whitespace (Python's: \\x1c-\\x1f and Unicode spaces too) is trimmed first; "
            f"what remains is at least {low} and {high} characters."
        )
    if field.default is not serializers.empty and not callable(field.default):
        default = field.default
        described["default"] = sorted(default) if isinstance(default, set) else default
    if getattr(field, "allow_null", False):
        described["nullable"] = True
    if notes:
        described["description"] = " ".join(notes)
    return described


def bounds(described: dict[str, Any], field: serializers.Field, low: str, low_key: str, high: str, high_key: str) -> None:
    for attribute, key in ((low, low_key), (high, high_key)):
        value = getattr(field, attribute, None)
        if value is not None:
            described[key] = value
