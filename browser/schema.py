"""The page id as the OpenAPI document describes it, for every page route."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiExample, OpenApiParameter

from browser.pages import PAGE_ID_PATTERN
from core.routes import RESERVED_PAGE_IDS

# The pattern a page id matches, less the words the router uses: those paths
# are other routes, so such a "page id" never reaches a page route.
PAGE_ID_SCHEMA_PATTERN = "^(?!(?:{})$){}$".format("|".join(sorted(RESERVED_PAGE_IDS)), PAGE_ID_PATTERN.pattern)
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
