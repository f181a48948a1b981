"""The in-process tests' runtime: a worker's runtime (worker/runtime.py) as
`serve` builds it, its browser not started, and Django's test clients that
carry it in every request as the worker's application does (core/runtime.py)."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import AsyncClient, AsyncRequestFactory, Client

from core.runtime import SCOPE_KEY
from worker.runtime import Runtime


class Carrying:
    """A test client or request factory whose every request carries `runtime`
    in its ASGI scope (a WSGI request, the sync client's: in its environ)."""

    def __init__(self, runtime: Runtime, **defaults: Any) -> None:
        super().__init__(**defaults)
        self.runtime = runtime

    def request(self, **request: Any) -> Any:
        return super().request(**request, **{SCOPE_KEY: self.runtime})


class RuntimeAsyncClient(Carrying, AsyncClient):
    pass


class RuntimeRequestFactory(Carrying, AsyncRequestFactory):
    pass


class RuntimeClient(Carrying, Client):
    pass


@pytest.fixture
def runtime() -> Runtime:
    return Runtime()


@pytest.fixture
def async_client(runtime: Runtime) -> RuntimeAsyncClient:
    return RuntimeAsyncClient(runtime)


@pytest.fixture
def request_factory(runtime: Runtime) -> RuntimeRequestFactory:
    return RuntimeRequestFactory(runtime)


@pytest.fixture
def runtime_client(runtime: Runtime) -> RuntimeClient:
    return RuntimeClient(runtime)
