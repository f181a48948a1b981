"""The bare-stack floor: what one authenticated request costs on this
machine with nothing of Penelope in it. A minimal async Django view behind a
constant-time bearer check, no middleware, no DRF, served by the same daphne
runner as the worker, answering a body the size of a page's state.

    python -m bench.floor PORT KEY

`bench.run` starts it beside the worker and alternates the two, like every
other pair, so the ratio is the price of the API's own layers.
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


def main() -> None:
    port, key = int(sys.argv[1]), sys.argv[2]
    configure(key)
    from django.core.asgi import get_asgi_application

    from core.serving import run_daphne

    async def nothing() -> None:
        return None

    application = get_asgi_application()
    run_daphne(application, host="127.0.0.1", port=port, on_ready=lambda: print("ready", flush=True), on_stop=nothing)


if __name__ == "__main__":
    main()
