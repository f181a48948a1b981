"""What is not shown to everyone who may read: a URL's credentials, and the
values a plugin marks secret in its results.

A webhook or notification URL may carry its receiver's credentials in its
user-info or its query string: the logs, and a read key's answers, show it by
`url_for_log`. A result's secret values (a cookie's value, a token) are
named by paths that a plugin action declares (`secret=` of
`plugins.framework.Family.action`); a read key's answers show `HIDDEN` in
their place (`hide_paths`). Both are plain functions of what they are given,
so the poll, the job list and the event sockets apply the same rules."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit, urlunsplit

# What a read key sees in place of a secret value, and in place of a URL's query string.
HIDDEN = "…"
# A path's segment that stands for every item of a list, or every value of an object.
EVERY = "*"

SecretPath = tuple[str, ...]


def url_for_log(url: str) -> str:
    """A callback URL as logs (and read keys) show it: without its user-info
    and its query string, which may carry a receiver's credentials (`…?…`
    says one was there), nor its fragment."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    try:
        port = parts.port
    except ValueError:
        port = None
    netloc = host + (f":{port}" if port else "")
    return urlunsplit((parts.scheme, netloc, parts.path, HIDDEN if parts.query else "", ""))


def secret_path(path: str) -> SecretPath:
    """A dotted path into a result (`token`, `session.token`,
    `cookies.*.value`), as the segments `hide_paths` follows. `*` is every
    item of a list or every value of an object. A mistake is the plugin
    author's, told when the family loads."""
    segments = tuple(path.split(".")) if isinstance(path, str) else ()
    if not segments or not all(segments):
        raise TypeError(f"A secret path is a dotted path into the result, like 'cookies.*.value'; got {path!r}.")
    return segments


def hide_paths(value: Any, paths: tuple[SecretPath, ...]) -> Any:
    """`value` with what each path names replaced by `HIDDEN`; `value` itself
    is left as it was (the parts on a path are copied). A path that names
    nothing in this value (an error's envelope, an item without the key)
    hides nothing."""
    for path in paths:
        value = _hide(value, path)
    return value


def _hide(value: Any, path: SecretPath) -> Any:
    head, rest = path[0], path[1:]
    if isinstance(value, dict):
        names = list(value) if head == EVERY else [head] if head in value else []
        if not names:
            return value
        copied = dict(value)
        for name in names:
            copied[name] = _hide(copied[name], rest) if rest else HIDDEN
        return copied
    if isinstance(value, list) and head == EVERY:
        return [_hide(item, rest) if rest else HIDDEN for item in value]
    return value
