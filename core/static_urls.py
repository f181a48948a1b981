"""The admin's static URLs under the request's root path.

Through the waker an admin page has a root path of its own
(`/w/{persona}`, penelope_site/asgi.py), and reverse() writes it into every
link. `{% static %}` and a form's media do not: they ask the staticfiles
storage, whose base URL is STATIC_URL, and Django adds the script prefix to
a relative STATIC_URL ("static/") once, at the setting's first read, which
is the worker's static handler's at start-up (penelope_site/asgi.py), so
"/static/" with no request's root path. This storage adds the root path of
the request at hand to each URL, as reverse() does.
"""

from __future__ import annotations

from django.contrib.staticfiles.storage import StaticFilesStorage
from django.urls import get_script_prefix


class RootPathStaticFilesStorage(StaticFilesStorage):
    def url(self, name: str | None) -> str:
        url = super().url(name)
        if not url.startswith("/") or url.startswith("//"):  # a STATIC_URL on another host
            return url
        return get_script_prefix().rstrip("/") + url
