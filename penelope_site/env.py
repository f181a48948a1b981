"""Reading settings from environment variables: what the worker's and the
waker's settings modules share."""

from __future__ import annotations

import os


def env_str(name: str, default: str = "") -> str:
    return os.environ.get(name, default).strip()


def env_float(name: str, default: float) -> float:
    raw = os.environ.get(name, "").strip()
    return float(raw) if raw else default


def env_int(name: str, default: int) -> int:
    raw = os.environ.get(name, "").strip()
    return int(raw) if raw else default


def env_bool(name: str, default: bool) -> bool:
    raw = os.environ.get(name, "").strip().lower()
    if not raw:
        return default
    return raw not in ("0", "false", "no", "off")


def env_floats(name: str, default: str) -> list[float]:
    raw = os.environ.get(name, "").strip() or default
    return [float(part) for part in raw.split(",") if part.strip()]


def env_proxy_ssl_header(name: str) -> tuple[str, str] | None:
    """Django's SECURE_PROXY_SSL_HEADER from `Header-Name: value` (the header
    a TLS-terminating proxy sets, and its value for HTTPS): ("HTTP_HEADER_NAME",
    "value"). Unset (the default): no header is trusted, and a request is
    HTTPS only when it reached the server itself over TLS."""
    raw = env_str(name)
    if not raw:
        return None
    header, colon, value = raw.partition(":")
    header, value = header.strip(), value.strip()
    if not colon or not value or not header or not all(part.isalnum() for part in header.split("-")):
        raise ValueError(
            f"{name} names the header a TLS proxy sets and its value for HTTPS, like "
            f"'X-Forwarded-Proto: https'; got {raw!r}."
        )
    return "HTTP_" + header.upper().replace("-", "_"), value


def front_door_settings() -> tuple[float, int, tuple[str, str] | None]:
    """What the worker and the waker read alike about the requests at their
    door: KEY_REFUSAL_S, how long a wrong key waits for its refusal (the
    waker's older name for it, CONSOLE_REFUSAL_S, read when it is unset);
    KEY_REFUSAL_QUEUE, how many of one address's wrong keys may wait at once
    (core/wrong_keys.py); and SECURE_PROXY_SSL_HEADER from PROXY_SSL_HEADER,
    the header a TLS-terminating proxy in front sets for HTTPS."""
    return (
        env_float("KEY_REFUSAL_S", env_float("CONSOLE_REFUSAL_S", 1.0)),
        env_int("KEY_REFUSAL_QUEUE", 16),
        env_proxy_ssl_header("PROXY_SSL_HEADER"),
    )


def logging_settings() -> dict:
    """LOGGING: plain lines on standard error, at PENELOPE_LOG_LEVEL."""
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
        "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
        "root": {"handlers": ["console"], "level": env_str("PENELOPE_LOG_LEVEL", "INFO")},
        "loggers": {
            "django.request": {"level": "CRITICAL"},
            "daphne": {"level": "WARNING"},
            # httpx logs each request's whole URL at INFO: a callback's user-info
            # and query string, a forwarded call's parameters. The webhook
            # deliverer logs its own line without them.
            "httpx": {"level": "WARNING"},
        },
    }
