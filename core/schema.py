"""The API's OpenAPI 3 description, generated from the code by drf-spectacular,
and the route that serves it (`GET /api/v1/schema`).

The views are plain async Django views: DRF's APIView is sync-only and the
Playwright objects live on the worker's event loop. drf-spectacular finds an
operation through the `cls` attribute DRF's own views carry, so `described`
gives each view a schema-only APIView class whose methods hold the
`@extend_schema` annotations. That class never serves a request: describing a
view changes nothing in how it answers and costs its requests nothing. Its
methods must be exactly the methods the view's `api_view` allows, checked at
import, so the description cannot drift from the routes on that point.

Shapes shared by several routes live here (the error envelope, the page id,
the lease header); each route's own shapes are serializers next to its view.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.http import HttpRequest, HttpResponse
from drf_spectacular.utils import (
    OpenApiExample,
    OpenApiParameter,
    OpenApiResponse,
    extend_schema,
    extend_schema_field,
)
from rest_framework import serializers
from rest_framework.parsers import JSONParser
from rest_framework.renderers import JSONRenderer
from rest_framework.views import APIView

from browser.pages import PAGE_ID_PATTERN, RESERVED_PAGE_IDS
from core.api import View, api_view, json_response

# The security scheme, declared in SPECTACULAR_SETTINGS["APPEND_COMPONENTS"].
BEARER = "bearerAuth"

# --- fields and shapes every route shares ---------------------------------------------


@extend_schema_field({"type": "boolean", "enum": [True]})
class TrueField(serializers.BooleanField):
    """`"success": true`."""


@extend_schema_field({"type": "boolean", "enum": [False]})
class FalseField(serializers.BooleanField):
    """`"success": false`."""


def ttl_schema() -> dict[str, Any]:
    return {"type": "number", "minimum": 0, "exclusiveMinimum": True, "maximum": settings.MAX_TTL_S}


@extend_schema_field(ttl_schema())
class TtlField(serializers.FloatField):
    """Seconds, more than 0 and at most MAX_TTL_S: a lease's ttl, a job's X-Result-Ttl."""


class ErrorEnvelope(serializers.Serializer):
    """Every failure: its status says what happened, `error` says it to a person."""

    success = FalseField()
    error = serializers.CharField(help_text="One sentence for a person; branch on the status, not on it.")
    page_id = serializers.CharField(allow_null=True, help_text="The page the request concerns, or null.")


class Success(serializers.Serializer):
    success = TrueField()
    page_id = serializers.CharField(allow_null=True, help_text="The page the answer concerns, or null.")


class PageSuccess(Success):
    page_id = serializers.CharField(help_text="The page the answer concerns.")


# What a status means when the route does not say more.
ERROR_MEANINGS = {
    400: "A bad parameter, header or page id; the sentence names it.",
    401: "No key, or a wrong one.",
    404: "Not found; the sentence says what.",
    408: "The action ran past its time limit, or a Playwright timeout fired inside it.",
    409: "The page is busy or runs a job.",
    413: "The body is larger than MAX_BODY_BYTES.",
    422: "The body is not valid JSON.",
    423: "The page is leased and the request does not carry its lease, or the lease is unknown or expired.",
    500: "An unexpected error in the worker or the action; the details are in the worker's log.",
    502: "The browser failed the step (a navigation error, a crashed tab).",
    503: "The browser is not running.",
    507: "The media store is full (MEDIA_MAX_MB).",
}
# Every POST body goes through `read_json_body`.
BODY_ERRORS = (413, 422)

WWW_AUTHENTICATE = OpenApiParameter(
    "WWW-Authenticate",
    {"type": "string", "enum": ['Bearer realm="penelope"']},
    OpenApiParameter.HEADER,
    required=True,
    response=[401],
    description="How to authenticate.",
)

# --- path parameters and headers ------------------------------------------------------

# The pattern a page id matches, less the words the router uses: those paths
# are other routes, so such a "page id" never reaches a page route.
PAGE_ID_SCHEMA_PATTERN = "^(?!(?:{})$){}$".format(
    "|".join(sorted(RESERVED_PAGE_IDS)), PAGE_ID_PATTERN.pattern
)
PAGE_ID = OpenApiParameter(
    "page_id",
    str,
    OpenApiParameter.PATH,
    pattern=PAGE_ID_SCHEMA_PATTERN,
    description=(
        "A page: 1 to 32 characters of a-z, 0-9, '_' and '-', starting with a letter or digit, "
        f"and none of {', '.join(sorted(RESERVED_PAGE_IDS))}. Another id answers 400."
    ),
    examples=[OpenApiExample("main", value="main")],
)
JOB_ID_PATTERN = "^[0-9a-f]{16}$"
LEASE_ID_PATTERN = "^[0-9a-f]{32}$"


def x_lease(description: str = "The page's lease, when it is leased.") -> OpenApiParameter:
    return OpenApiParameter("X-Lease", str, OpenApiParameter.HEADER, description=description)


# --- describing a view ------------------------------------------------------------------


def responses(
    answers: Mapping[int | str | tuple[int, str], Any],
    errors: Iterable[int] | Mapping[int, str] = (),
    *,
    public: bool = False,
) -> dict[Any, Any]:
    """An operation's answers: its successes as given, and the envelope for each
    error status (401 too unless the route is public), described by `errors`'
    sentences where it has them."""
    described = dict(errors) if isinstance(errors, Mapping) else {}
    statuses = set(described) | set(errors)
    if not public:
        statuses.add(401)
    result: dict[Any, Any] = dict(answers)
    for status in sorted(statuses):
        result[status] = OpenApiResponse(ErrorEnvelope, described.get(status) or ERROR_MEANINGS[status])
    return result


def operation(
    *,
    operation_id: str,
    summary: str,
    tags: list[str],
    answers: Mapping[Any, Any],
    errors: Iterable[int] | Mapping[int, str] = (),
    public: bool = False,
    parameters: list[OpenApiParameter] | None = None,
    **more: Any,
) -> dict[str, Any]:
    """The `extend_schema` arguments of one operation."""
    all_parameters = list(parameters or [])
    if not public:
        all_parameters.append(WWW_AUTHENTICATE)
    return {
        "operation_id": operation_id,
        "summary": summary,
        "tags": tags,
        "responses": responses(answers, errors, public=public),
        "parameters": all_parameters,
        "auth": None if public else [{BEARER: []}],
        **more,
    }


def described(**operations: dict[str, Any] | Callable[[], dict[str, Any]]) -> Callable[[View], View]:
    """Describe an `api_view` view for the schema: one `operation(...)` (or a
    function answering one, for descriptions that read the plugin registry)
    per method, exactly the methods the view allows."""

    def attach(view: View) -> View:
        allowed = getattr(view, "allowed_methods", None)
        declared = {method.upper() for method in operations}
        if allowed is None or declared != allowed:
            raise ImproperlyConfigured(
                f"{view.__module__}.{view.__name__}: described methods {sorted(declared)} "
                f"are not the methods it allows {sorted(allowed or ())}."
            )
        attributes: dict[str, Any] = {
            "__doc__": view.__doc__ or "",
            "__module__": view.__module__,
            # The key check is the middleware's; these only keep DRF's session
            # and basic authentication out of the description.
            "authentication_classes": (),
            "permission_classes": (),
            "renderer_classes": (JSONRenderer,),
            "parser_classes": (JSONParser,),
        }
        for method, spec in operations.items():
            attributes[method.lower()] = _annotated_stub(spec)
        view.cls = type(f"{view.__name__}_description", (DescribedView,), attributes)
        view.initkwargs = {}
        return view

    return attach


class DescribedView(APIView):
    # A view's description for the schema generator; it never serves requests.
    # (A comment, not a docstring: the generator would take it for every
    # operation's description.)
    pass


def _annotated_stub(spec: dict[str, Any] | Callable[[], dict[str, Any]]) -> Callable[..., Any]:
    def stub(self, request, *args, **kwargs):  # pragma: no cover - never called
        raise RuntimeError("a schema description does not serve requests")

    if callable(spec):
        # Read when the schema is generated, after the plugin families load.
        return _LazyStub(stub, spec)
    return extend_schema(**spec)(stub)


class _LazyStub:
    """A method whose `@extend_schema` arguments come from a function, called
    the first time the schema generator looks the method up."""

    def __init__(self, stub: Callable[..., Any], spec: Callable[[], dict[str, Any]]) -> None:
        self.stub = stub
        self.spec = spec
        self.decorated: Callable[..., Any] | None = None

    def __get__(self, instance: Any, owner: type | None = None) -> Any:
        if self.decorated is None:
            self.decorated = extend_schema(**self.spec())(self.stub)
        return self.decorated.__get__(instance, owner) if instance is not None else self.decorated


def without_enum_ids(result: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
    """Postprocessing hook: drop the `x-spec-enum-id` marks drf-spectacular
    leaves for its enum hook, which is off (enums stay inline)."""

    def strip(node: Any) -> Any:
        if isinstance(node, dict):
            return {key: strip(value) for key, value in node.items() if key != "x-spec-enum-id"}
        if isinstance(node, list):
            return [strip(item) for item in node]
        return node

    return strip(result)


# --- the schema route ----------------------------------------------------------------------

_generated: dict[str, Any] | None = None


def generate() -> dict[str, Any]:
    """The worker's OpenAPI document; it depends only on the code and the
    settings, so it is generated once per process."""
    global _generated
    if _generated is None:
        from drf_spectacular.generators import SchemaGenerator

        _generated = SchemaGenerator().get_schema(request=None, public=True)
    return _generated


class OpenApiDocument(serializers.Serializer):
    """An OpenAPI 3.0 document."""

    openapi = serializers.RegexField(r"^3\.0\.\d+$")
    info = serializers.DictField()
    paths = serializers.DictField()
    components = serializers.DictField()


@described(
    get=operation(
        operation_id="getSchema",
        summary="This OpenAPI document",
        description=(
            "The API's OpenAPI 3 description, generated from the code. Like every route but health it needs "
            "the key: it lists this worker's plugin families, which are the persona's own. It is the document "
            "itself, not wrapped in a success object."
        ),
        tags=["schema"],
        answers={200: OpenApiResponse(OpenApiDocument, "The document.")},
    )
)
@api_view("GET")
async def schema(request: HttpRequest) -> HttpResponse:
    # Generation imports and inspects code: keep it off the event loop.
    document = _generated or await sync_to_async(generate, thread_sensitive=False)()
    return json_response(document)
