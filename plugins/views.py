"""The plugin and primitive routes.

Checks run in the contract's order: key (the authentication class) →
headers and parameters 400 (malformed JSON 422) → page 404 → plugin 404 →
lease 423 → busy 409. Jobs come in as the plugin view's `jobs` (a
`JobStarter`, given in penelope_site/urls.py): this module knows nothing of them.
"""

from __future__ import annotations

from typing import Any, Protocol

from django.http import HttpRequest, HttpResponse
from drf_spectacular.utils import OpenApiExample, OpenApiParameter, OpenApiResponse
from rest_framework import serializers

from browser.pages import ManagedPage, validate_page_id
from browser.registry import pages_of
from browser.schema import PAGE_ID
from core.api import ApiError
from core.bounded_http import MAX_HEAD_BYTES
from core.rest import ApiView, answer, represent
from core.routes import ANY
from core.runtime import runtime_of
from core.schema import BODY_ERRORS, DescribedByView, operation, x_lease
from core.shapes import ErrorEnvelope, PageSuccess
from plugins import debug
from plugins.framework import Action, families, find_action
from plugins.primitives import primitives
from plugins.running import run_anywhere, run_plain


class JobStarter(Protocol):
    async def options(self, request: HttpRequest) -> Any | None:
        """The job options the request's headers ask for (None: a plain call); 400 if bad."""

    async def start(
        self, request: HttpRequest, *, page: ManagedPage, action: Action, params: dict[str, Any], lease_id: str | None,
        options: Any,
    ) -> HttpResponse:
        """Claim the page for a job, start it and answer 202."""

    def describe(self) -> dict[str, Any]:
        """For the schema: the job headers (`parameters`), the 202 (`answers`),
        the webhook (`callbacks`) and the statuses a job start adds (`errors`)."""


JOB_HEADERS = ("X-Callback-Url", "X-Result-Ttl")


# --- the routes' description, read when the schema is generated -------------------------


class ActionAnswer(PageSuccess):
    """`success`, `page_id` and the fields the action answers."""

    def to_representation(self, body: dict[str, Any]) -> dict[str, Any]:
        # The action's own fields are its own: they pass as it answered them.
        return {**body, **super().to_representation(body)}


class ActionOutcome(serializers.Serializer):
    """The answer of a plain call: the action's success or the envelope."""

    def to_representation(self, body: dict[str, Any]) -> dict[str, Any]:
        if body.get("success") is True:
            return represent(ActionAnswer, body)
        shown = represent(ErrorEnvelope, body)
        if "artifacts" in body:  # X-Debug: what the failed run left behind
            shown["artifacts"] = body["artifacts"]
        return shown


FREE_FORM = {"type": "object", "additionalProperties": True}


def action_parameters(action: Action) -> str:
    if action.params is None:
        return "none"
    fields = action.params().fields.items()
    return ", ".join(f"`{name}`" + ("" if field.required else " (optional)") for name, field in fields)


def plugin_operation(method: str, jobs: JobStarter | None) -> dict[str, Any]:
    loaded = families()
    first = next(iter(loaded.values()), None)
    example = None
    if first is not None and first.actions:
        example = (first.name, "state" if "state" in first.actions else next(iter(first.actions)))
    actions = "\n".join(
        f"- `{action.route}`: {action_parameters(action)}" for family in loaded.values() for action in family.actions.values()
    )
    jobs = jobs.describe() if jobs else {}
    parameters = [
        PAGE_ID,
        OpenApiParameter(
            "family", str, OpenApiParameter.PATH, description="A plugin family of PENELOPE_PLUGINS.",
            examples=[OpenApiExample(example[0], value=example[0])] if example else None,
        ),
        OpenApiParameter(
            "action", str, OpenApiParameter.PATH, description="One of the family's actions.",
            examples=[OpenApiExample(example[1], value=example[1])] if example else None,
        ),
        x_lease(),
        OpenApiParameter(
            debug.HEADER, {"type": "string", "enum": list(debug.MODES)}, OpenApiParameter.HEADER,
            description=(
                "What the run leaves behind for its author: with `on-failure` (a failure only) or `always`, the "
                "answer (a job's result) gains `artifacts`, media links to a screenshot and the HTML of the page as "
                "the action ended, its console messages and page errors, its failed requests and a Playwright trace. "
                "Without it the worker's DEBUG_ARTIFACTS decides (off by default)."
            ),
        ),
        *jobs.get("parameters", []),
    ]
    if method == "GET":
        parameters.append(
            OpenApiParameter(
                "parameters",
                {"type": "object", "additionalProperties": {"type": "string", "maxLength": MAX_HEAD_BYTES}},
                OpenApiParameter.QUERY,
                style="form",
                explode=True,
                description=(
                    "The action's parameters, one query parameter each, converted as the action declares. The "
                    f"request line and headers together are at most {MAX_HEAD_BYTES} bytes (longer answers 414), so "
                    "a value sent here is at most that, whatever the action's own maximum: send long values as a "
                    "POST body."
                ),
            )
        )
    errors = {
        400: (
            "A parameter is missing, invalid (a selector the browser cannot parse too), not declared by the action, "
            "or given twice; or a bad job header."
        ),
        403: BROWSER_REFUSED,
        404: "The page is not open, no such action, or the action's own 'not found'.",
        408: "",
        409: "The page stayed busy for PAGE_WAIT_S.",
        423: "",
        500: "The action raised an unexpected error or returned no object.",
        502: "",
        503: "The browser is not running, or a family's own service is off (the demo site).",
        507: "",
        **jobs.get("errors", {}),
    }
    if method == "POST":
        errors = {**dict.fromkeys(BODY_ERRORS, ""), **errors}
    where = "the query string" if method == "GET" else "the JSON object body"
    return operation(
        operation_id="callPlugin" if method == "GET" else "callPluginWithBody",
        summary=f"Run a plugin action on a page, parameters in {where}",
        description=(
            f"Runs `{{family}}/{{action}}` on the page, with its parameters in {where}. A parameter the action "
            "does not declare answers 400 naming it (its schema under `x-actions` then has `additionalProperties: "
            "false`; a family may declare that it takes others), as does one given twice. With a job header it "
            "answers 202 at once instead.\n\n"
            "The actions of this worker and their parameters (each action's parameter schema, with types, "
            f"limits and defaults, is under `x-actions`, pointing into the components):\n\n{actions}"
        ),
        tags=["plugins"],
        parameters=parameters,
        callbacks=jobs.get("callbacks"),
        request={"application/json": FREE_FORM} if method == "POST" else None,
        answers={
            200: OpenApiResponse(ActionAnswer, "The action's answer."),
            **jobs.get("answers", {}),
            "default": OpenApiResponse(ErrorEnvelope, "A status of the action's own, with the envelope."),
        },
        errors=errors,
    )


BROWSER_REFUSED = (
    "A read key, which may not act; or, under BROWSER_REFUSE_PRIVATE, the browser's egress guard refused a "
    "navigation of the page at some hop (a loopback, private, link-local or metadata address, or a name that "
    "does not resolve, that BROWSER_ALLOW does not name; a metadata address or the worker's own port, which it "
    "never allows): the sentence names the address."
)


def primitive_operation() -> dict[str, Any]:
    names = "\n".join(f"- `{name}`: {action_parameters(action)}" for name, action in primitives.actions.items())
    return operation(
        operation_id="callPrimitive",
        summary="One low-level page step",
        description=(
            "Runs one primitive on the page, synchronously (never as a job), with its parameters in the JSON "
            "object body; a parameter it does not declare answers 400 naming it.\n\n"
            f"The primitives and their parameters:\n\n{names}"
        ),
        tags=["plugins"],
        parameters=[
            PAGE_ID,
            OpenApiParameter(
                "name", str, OpenApiParameter.PATH, description="The primitive.",
                examples=[OpenApiExample("content", value="content")],
            ),
            x_lease(),
        ],
        request={"application/json": FREE_FORM},
        answers={200: OpenApiResponse(ActionAnswer, "The primitive's answer.")},
        errors={
            400: "A parameter is missing, invalid (a selector the browser cannot parse too) or not declared; or a job header.",
            403: BROWSER_REFUSED,
            404: "The page is not open, or no such primitive.",
            408: "",
            409: "The page stayed busy for PAGE_WAIT_S.",
            423: "",
            500: "",
            502: "",
            503: "",
            507: "",
            **dict.fromkeys(BODY_ERRORS, ""),
        },
    )


def query_parameters(request: Any, page_id: str) -> dict[str, str]:
    """A GET call's parameters: one value each. A name given twice answers
    400 (Django's QueryDict would keep the last one without a word)."""
    given = request.query_params
    for name, values in given.lists():
        if len(values) > 1:
            raise ApiError(400, f"Parameter '{name[:64]}' is given {len(values)} times in the query string; give it once.", page_id)
    return {name: values[0] for name, values in given.lists()}


class PluginCall(ApiView):
    jobs: JobStarter | None = None  # set by the URL configuration
    acts = True  # a GET runs the action: a read key may not
    schema = DescribedByView()

    def describe(self, method: str) -> dict[str, Any]:
        return plugin_operation(method, self.jobs)

    def what_it_does(self, request: Any) -> str:
        route = f"{self.kwargs['family'][:64]}/{self.kwargs['action'][:64]}"
        if any(header in request.headers for header in JOB_HEADERS):
            return f"starting a job of {route}"
        return f"calling plugin {route}"

    async def get(self, request: Any, page_id: str, family: str, action: str) -> HttpResponse:
        return await self.call(request, query_parameters(request, page_id), page_id, family, action)

    async def post(self, request: Any, page_id: str, family: str, action: str) -> HttpResponse:
        return await self.call(request, request.data, page_id, family, action)

    async def call(self, request: Any, data: dict[str, Any], page_id: str, family: str, action: str) -> HttpResponse:
        job_options = await self.jobs.options(request) if self.jobs else None
        debug_mode = debug.effective(debug.parse_mode(request.headers.get(debug.HEADER)))
        lease_id = request.headers.get("X-Lease")
        anywhere = page_id == ANY
        if anywhere and lease_id is not None:
            raise ApiError(400, "X-Lease does not apply to any: it runs on a page nobody leases.", page_id)
        if not anywhere:
            validate_page_id(page_id)
        found = find_action(family, action)
        params = found.validate(data) if found else {}
        pages = pages_of(request)
        page = None if anywhere else pages.get(page_id)
        if found is None:
            raise ApiError(404, f"No plugin action {family[:64]}/{action[:64]}.", page_id)
        if job_options is not None:
            return await self.jobs.start(request, page=page, action=found, params=params, lease_id=lease_id, options=job_options)
        used = runtime_of(request).request_log.record_credential_use  # a credential's use, into the request log
        outcome = await (
            run_anywhere(pages, found, params, debug_mode, used) if anywhere
            else run_plain(pages, page, found, params, lease_id, debug_mode, used)
        )
        return answer(ActionOutcome, outcome.body, outcome.status)


class PrimitiveCall(ApiView):
    schema = DescribedByView()

    def describe(self, method: str) -> dict[str, Any]:
        return primitive_operation()

    def what_it_does(self, request: Any) -> str:
        return f"calling primitive {self.kwargs['name'][:64]}"

    async def post(self, request: Any, page_id: str, name: str) -> HttpResponse:
        data = request.data
        if any(header in request.headers for header in JOB_HEADERS):
            raise ApiError(400, "Primitives are synchronous: X-Callback-Url and X-Result-Ttl apply to plugin routes only.")
        if debug.parse_mode(request.headers.get(debug.HEADER)) in (debug.ON_FAILURE, debug.ALWAYS):
            raise ApiError(400, f"{debug.HEADER} applies to plugin calls: a primitive is one step, seen in its answer.")
        validate_page_id(page_id)
        found = primitives.actions.get(name)
        params = found.validate(data) if found else {}
        pages = pages_of(request)
        page = pages.get(page_id)
        if found is None:
            raise ApiError(404, f"No primitive {name[:64]}; there are {', '.join(sorted(primitives.actions))}.", page_id)
        outcome = await run_plain(pages, page, found, params, request.headers.get("X-Lease"))
        return answer(ActionOutcome, outcome.body, outcome.status)
