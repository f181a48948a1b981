"""A persona's credentials over HTTP: store one (PUT), read, list and delete
them. No answer holds a secret: a read says which are set. A read key reads
names and origins only; storing and deleting need the full key."""

from __future__ import annotations

from typing import Any

from django.http import HttpResponse
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema

from core.api import ApiError
from core.auth import READ
from core.db_thread import on_db_thread
from core.rest import ApiView, answer
from core.schema import BODY_ERRORS, operation
from credentials import rules, selectors, services
from credentials.shapes import CredentialAnswer, CredentialDeleted, CredentialInput, CredentialList

NAME_PARAMETER = OpenApiParameter(
    "name", str, OpenApiParameter.PATH, pattern=rules.NAME_PATTERN,
    description="The credential's name: 1 to 64 of a-z, 0-9, '_' and '-'. Another answers 404 (400 to a PUT).",
)
READ_KEY_SEES = "A read key (PENELOPE_READ_KEYS) sees its `name` and `url` only."
IN_THE_BODY = "A credential's fields go in the JSON body, never in the query string: send none there."


def reads_all(request: Any) -> bool:
    return request.user.role != READ


class CredentialCollection(ApiView):
    @extend_schema(
        **operation(
            operation_id="listCredentials",
            summary="List the persona's credentials, by name",
            description=f"Each with its origin, user name and which secrets are set; never a secret. {READ_KEY_SEES}",
            tags=["credentials"],
            answers={200: CredentialList},
        )
    )
    async def get(self, request: Any) -> HttpResponse:
        listed = await on_db_thread(
            selectors.credentials_shown if reads_all(request) else selectors.credentials_for_reader
        )()
        return answer(CredentialList, {"success": True, "page_id": None, "credentials": listed})


class CredentialDetail(ApiView):
    does = {"PUT": "storing a credential", "DELETE": "deleting a credential"}

    @extend_schema(
        **operation(
            operation_id="getCredential",
            summary="One credential, without its secrets",
            description=f"Its origin, user name and which secrets are set; never a secret. {READ_KEY_SEES}",
            tags=["credentials"],
            parameters=[NAME_PARAMETER],
            answers={200: CredentialAnswer},
            errors={404: "No such credential."},
        )
    )
    async def get(self, request: Any, name: str) -> HttpResponse:
        shown = await on_db_thread(
            selectors.credential_shown if reads_all(request) else selectors.credential_for_reader
        )(name)
        return answer(CredentialAnswer, shown)

    @extend_schema(
        **operation(
            operation_id="putCredential",
            summary="Store a credential: its site's origin, user name and sealed secrets",
            description=(
                "Creates the credential, or replaces it whole: a field left out is no longer set. The password, "
                "TOTP secret and notes are sealed (AES-256-GCM) before they are stored; no answer, log line or "
                "error holds them. Flows on the credential's origin use them (`ctx.credential`, "
                "`web/fill-credential`). Every field is checked first; nothing is stored when one is refused."
            ),
            tags=["credentials"],
            parameters=[NAME_PARAMETER],
            request=CredentialInput,
            answers={
                200: OpenApiResponse(CredentialAnswer, "Replaced."),
                201: OpenApiResponse(CredentialAnswer, "Created."),
            },
            errors={
                400: "A bad name, a field unknown, missing, of the wrong type or not valid; the sentence names it and never its value.",
                403: "A read key (PENELOPE_READ_KEYS) stores nothing.",
                **dict.fromkeys(BODY_ERRORS, ""),
            },
        )
    )
    async def put(self, request: Any, name: str) -> HttpResponse:
        if request.query_params:
            raise ApiError(400, IN_THE_BODY)
        shown, created = await on_db_thread(services.put_credential)(name, request.data)
        return answer(CredentialAnswer, shown, 201 if created else 200)

    @extend_schema(
        **operation(
            operation_id="deleteCredential",
            summary="Delete a credential",
            tags=["credentials"],
            parameters=[NAME_PARAMETER],
            answers={200: CredentialDeleted},
            errors={404: "No such credential.", 403: "A read key (PENELOPE_READ_KEYS) deletes nothing."},
        )
    )
    async def delete(self, request: Any, name: str) -> HttpResponse:
        if not await on_db_thread(services.delete_credential)(name):
            raise selectors.no_such_credential(name)
        return answer(CredentialDeleted, {"success": True, "page_id": None, "deleted": name})
