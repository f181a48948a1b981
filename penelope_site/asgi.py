"""The ASGI application daphne serves."""

import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "penelope_site.settings")

from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler  # noqa: E402
from django.core.asgi import get_asgi_application  # noqa: E402

# The admin's CSS and scripts come from the apps themselves; no collectstatic.
application = ASGIStaticFilesHandler(get_asgi_application())
