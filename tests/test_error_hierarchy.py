"""One error hierarchy, in-process (no browser, no server): every domain
refusal has its status in the one table, a job header's refusal is one of
them, and whether an attempt is worth another is its error's `transient`,
not its status. Actions run through the real `run_action`, on no page.

And one vocabulary, read from the source: no two exception classes of the
project share a name, a class named a refusal (`...Refused`, `...Refusal`)
is one, and every refusal has its status (issue 57, item 4)."""

from __future__ import annotations

import ast
import builtins
import importlib
import inspect
import json
from functools import cache

import pytest
from django.test import RequestFactory

from core import errors
from core.api import STATUS_OF, ApiError, StatusError, status_of
from core.rest import envelope_handler
from harness.worker import ROOT
from jobs.options import PRIORITY_HEADER, RETRY_HEADER, TTL_HEADER, parse_options, transient
from plugins.framework import Context, Family, PluginError
from plugins.running import run_action
from tests.test_layout import module_name, python_files

DOMAIN_ERRORS = [
    kind for _, kind in inspect.getmembers(errors, inspect.isclass)
    if issubclass(kind, errors.DomainError) and kind is not errors.DomainError
]

# The failures that may pass by themselves, as X-Retry has retried them
# (the statuses 408, 502 and 503 they are answered with).
MAY_PASS = {
    errors.ActionTimedOut, errors.BrowserStepFailed, errors.TabLost, errors.BrowserNotRunning,
    errors.JobsFull, errors.WaitersFull, errors.Interrupted,
}


def test_every_domain_error_has_its_status_in_the_one_table():
    missing = [kind.__name__ for kind in DOMAIN_ERRORS if kind not in STATUS_OF]
    assert missing == []
    assert set(STATUS_OF) == set(DOMAIN_ERRORS)  # and the table lists nothing else
    assert status_of(errors.BadJobHeader(TTL_HEADER, "no")) == 400


def test_the_errors_that_may_pass_are_the_ones_retried_before():
    assert {kind for kind in DOMAIN_ERRORS if kind.transient} == MAY_PASS


def test_a_plugin_error_is_a_refusal_but_no_api_error_and_no_domain_error():
    refused = PluginError(404, "Account ghost does not exist.")
    assert isinstance(refused, errors.Refusal)
    assert not isinstance(refused, ApiError | errors.DomainError)
    assert isinstance(ApiError(400, "no"), errors.Refusal) and isinstance(errors.PageBusy("busy"), errors.Refusal)


family = Family("error-hierarchy-test")


@family.action("raise")
async def raise_it(page, params, ctx):
    raise params["error"]


class PageBusyForAWhile(errors.PageBusy):
    """A refusal answered 409 that says it will pass."""

    transient = True


async def attempt(error: Exception):
    return await run_action(family.actions["raise"], None, {"error": error}, Context(page_id="main"))


@pytest.mark.parametrize(
    ("error", "status", "worth"),
    [
        (PageBusyForAWhile("Page main is busy for a while."), 409, True),  # a status never retried before
        (errors.ActionTimedOut("error-hierarchy-test/raise ran past its time limit of 1 s."), 408, True),
        (errors.TabLost("The tab went."), 502, True),
        (errors.BadAction("The selector is not valid."), 400, False),
        (errors.StoreFull("No room (MEDIA_MAX_MB)."), 507, False),
        (PluginError(502, "The site answered 500."), 502, True),  # without its word, a plugin's status decides
        (PluginError(404, "No such account."), 404, False),
        (PluginError(418, "Try me again.", retry=True), 418, True),
        (PluginError(503, "A wrong password.", retry=False), 503, False),
        (ApiError(503, "The HTTP layer's own."), 503, True),
        (ApiError(400, "The body must be a JSON object."), 400, False),
    ],
)
async def test_the_error_decides_whether_an_attempt_is_worth_another(error, status, worth):
    outcome = await attempt(error)
    assert outcome.status == status
    assert outcome.body == {"success": False, "error": error.message, "page_id": "main"}
    assert transient(outcome) is worth


def test_a_bad_job_header_is_a_domain_error_answered_400_naming_the_page():
    request = RequestFactory().post("/api/v1/pages/main/demo/echo", headers={TTL_HEADER: "30", PRIORITY_HEADER: "12"})
    with pytest.raises(errors.BadJobHeader) as refused:
        parse_options(request)
    assert refused.value.header == PRIORITY_HEADER
    response = envelope_handler(refused.value, {"kwargs": {"page_id": "main"}})
    assert response.status_code == 400
    assert json.loads(response.content) == {
        "success": False, "error": "X-Priority must be a whole number from 0 to 9.", "page_id": "main",
    }


def test_a_job_header_sent_without_its_job_names_itself():
    request = RequestFactory().post("/api/v1/pages/main/demo/echo", headers={RETRY_HEADER: "2"})
    with pytest.raises(errors.BadJobHeader) as refused:
        parse_options(request)
    assert refused.value.header == RETRY_HEADER and status_of(refused.value) == 400


def test_a_queue_full_answer_keeps_its_retry_after():
    response = envelope_handler(errors.QueueFull("Page main has QUEUE_MAX jobs waiting.", retry_after_s=7), {})
    assert response.status_code == 429 and response["Retry-After"] == "7"


# --- one vocabulary --------------------------------------------------------------------

# Not the apps: the suite, its harness, and the Python client (a package of
# its own that never imports the worker's; its `Refused` and `QueueFull`
# are its documented names for the answers it gets, docs/guides/PYTHON_CLIENT.md).
NOT_THE_APPS = {"tests", "harness", "client"}
# Bases from outside the project that are exceptions, besides the built-in ones.
FOREIGN_EXCEPTIONS = {"PlaywrightError", "Error"}


@cache
def exception_classes() -> list[tuple[str, str]]:
    """(module, class name) of every exception class the apps define, read
    from the source: a class is one when a base is a built-in exception, a
    foreign one, or (to a fixed point) one of the project's."""
    classes: list[tuple[str, str, list[str]]] = []
    for path in python_files():
        if path.relative_to(ROOT).parts[0] in NOT_THE_APPS:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef):
                bases = [ast.unparse(base).rpartition(".")[2] for base in node.bases]
                classes.append((module_name(path), node.name, bases))
    known = {
        name
        for name in dir(builtins)
        if isinstance(getattr(builtins, name), type) and issubclass(getattr(builtins, name), BaseException)
    } | FOREIGN_EXCEPTIONS
    found: set[tuple[str, str]] = set()
    while True:
        more = {(module, name) for module, name, bases in classes if set(bases) & known} - found
        if not more:
            return sorted(found)
        found |= more
        known |= {name for _, name in more}


def test_no_two_exception_classes_of_the_project_share_a_name():
    where: dict[str, list[str]] = {}
    for module, name in exception_classes():
        where.setdefault(name, []).append(module)
    assert len(where) > 40  # the walk found the project's classes (the refusals alone are more)
    assert {name: modules for name, modules in where.items() if len(modules) > 1} == {}


def test_a_class_named_a_refusal_is_one_and_every_refusal_has_its_status():
    kinds = [getattr(importlib.import_module(module), name) for module, name in exception_classes()]
    named = [kind for kind in kinds if kind.__name__.endswith(("Refused", "Refusal"))]
    assert errors.NavigationRefused in named and errors.Refusal in named
    assert [kind.__qualname__ for kind in named if not issubclass(kind, errors.Refusal)] == []
    # A refusal is a domain error the table maps (itself or a base), or one
    # that carries its own status (core.api.StatusError: ApiError, PluginError, the waker's).
    bases = {errors.Refusal, errors.DomainError, StatusError}
    unmapped = [
        f"{kind.__module__}.{kind.__qualname__}"
        for kind in kinds
        if issubclass(kind, errors.Refusal)
        and kind not in bases
        and not issubclass(kind, StatusError)
        and not any(base in STATUS_OF for base in kind.__mro__)
    ]
    assert unmapped == []
    # and the tree has the two kinds core/errors.py describes, nothing else straight under Refusal.
    assert {kind for kind in kinds if errors.Refusal in kind.__bases__} == {errors.DomainError, StatusError}
