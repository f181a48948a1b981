"""The bare-stack floors: what one authenticated request costs on this
machine with nothing of Penelope in it, served by the same daphne runner as
the worker and answering a body the size of a page's state.

    python -m bench.floor PORT KEY          # a minimal async Django view: no middleware, no DRF
    python -m bench.floor PORT KEY --raw    # a bare ASGI callable: no Django at all

Both check the bearer key in constant time. `bench.run` starts each beside
the worker and alternates them, like every other pair: the Django floor's
ratio is the price of the API's own layers, the raw one's the price of
Django, DRF and the API together.
"""

from __future__ import annotations

import hmac
import json
import sys

from django.conf import settings
from django.http import HttpResponse
from django.urls import path

BODY = json.dumps(
    {"success": True, "page_id": "main", "busy": False, "waiting": 0, "job_id": None, "leased": False,
     "lease_expires_in": None, "url": "about:blank", "tab": "open", "reopened": None},
    separators=(",", ":"),
).encode()


def configure(key: str) -> None:
    settings.configure(
        DEBUG=False,
        SECRET_KEY="bench-floor",
        ALLOWED_HOSTS=["*"],
        ROOT_URLCONF=__name__,
        MIDDLEWARE=[],
        INSTALLED_APPS=[],
        FLOOR_KEY=key,
    )


async def state(request):
    scheme, _, given = request.headers.get("Authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not hmac.compare_digest(given.strip().encode(), settings.FLOOR_KEY.encode()):
        return HttpResponse(b'{"success":false}', status=401, content_type="application/json")
    return HttpResponse(BODY, content_type="application/json")


urlpatterns = [path("api/v1/main", state)]

JSON_HEADERS = [(b"content-type", b"application/json")]


def raw_application(key: str):
    """The floor without Django: the same check and body as `state`, straight
    on ASGI (daphne's scope, one receive for the request's body)."""
    expected = b"bearer " + key.encode()

    async def application(scope: dict, receive, send) -> None:
        if scope["type"] != "http":
            return
        while (await receive()).get("more_body"):
            pass
        given = next((value for name, value in scope["headers"] if name == b"authorization"), b"")
        allowed = scope["path"] == "/api/v1/main" and hmac.compare_digest(given[:7].lower() + given[7:].strip(), expected)
        status, body = (200, BODY) if allowed else (401, b'{"success":false}')
        await send({"type": "http.response.start", "status": status,
                    "headers": [*JSON_HEADERS, (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})

    return application


def main() -> None:
    port, key = int(sys.argv[1]), sys.argv[2]
    configure(key)  # core.serving reads settings; the raw application never does
    from django.core.asgi import get_asgi_application

    from core.serving import run_daphne

    async def nothing() -> None:
        return None

    application = raw_application(key) if "--raw" in sys.argv[3:] else get_asgi_application()
    run_daphne(application, host="127.0.0.1", port=port, on_ready=lambda: print("ready", flush=True), on_stop=nothing)


if __name__ == "__main__":
    main()
