"""The console's pages: sign-in, the fleet, a persona, its actions, the jobs
search, and its own CSS and JavaScript. Server-rendered: every page works
with JavaScript off; the script only refreshes what is on the page."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from django.conf import settings
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.loader import render_to_string

from console import actions, auth, present
from console.auth import Visitor
from console.charts import workload_charts
from console.fleet import STATES, WakerFleet, current_fleet
from console.search import SearchInvalid, searched
from core.api import status_of
from core.wrong_keys import KeyFlood, address_of
from jobs.store_reads import JOB_STATES

# The fleet table's columns: the sort's word and the heading.
COLUMNS = [
    ("name", "Persona"), ("state", "State"), ("memory", "Memory"), ("pages", "Pages busy / open"),
    ("running", "Running"), ("queued", "Queued"), ("failed_hour", "Failed 1 h"), ("failed_day", "Failed 24 h"),
    ("next_fire", "Next fire"), ("last_woke", "Last wake"), ("uptime", "Uptime"),
]
STATIC = Path(__file__).resolve().parent / "static" / "console"
STATIC_TYPES = {"console.css": "text/css; charset=utf-8", "console.js": "text/javascript; charset=utf-8"}
# No page is cached, framed, or allowed a script or style the waker did not serve.
HEADERS = {
    "Cache-Control": "no-store",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "same-origin",
    "X-Content-Type-Options": "nosniff",
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
        "form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
    ),
}


def page(request: HttpRequest, template: str, context: dict[str, Any], status: int = 200) -> HttpResponse:
    body = render_to_string(f"console/{template}", {"refresh_s": settings.CONSOLE_REFRESH_S, **context}, request)
    return HttpResponse(body, status=status, headers=HEADERS)


def refused(request: HttpRequest, status: int, message: str) -> HttpResponse:
    return page(request, "refused.html", {"message": message}, status)


def guarded(view):
    return auth.console_page(lambda: current_fleet().key_guard, refused=refused)(view)


async def sign_in(request: HttpRequest) -> HttpResponse:
    next_path = auth.safe_next(request.GET.get("next") or request.POST.get("next"))
    if request.method == "GET":
        return page(request, "sign_in.html", {"next": next_path})
    if request.method != "POST":
        return refused(request, 405, "Use GET or POST.")
    given = request.POST.get("key", "")
    try:
        right = await current_fleet().key_guard.check(address_of(request), lambda: auth.key_matches(given))
    except KeyFlood as flood:
        return auth.too_many(
            page(request, "sign_in.html", {"next": next_path, "error": flood.message}, status_of(flood)), flood
        )
    if not right:
        return page(request, "sign_in.html", {"next": next_path, "error": "That is not the waker's key."}, 403)
    return auth.sign_in(HttpResponseRedirect(next_path), request)


@guarded
async def sign_out(request: HttpRequest, visitor: Visitor) -> HttpResponse:
    if request.method != "POST" or not auth.csrf_ok(request, visitor):
        return refused(request, 403, "Signing out takes the console's own form.")
    return auth.sign_out(HttpResponseRedirect("/console/sign-in"))


@guarded
async def fleet_page(request: HttpRequest, visitor: Visitor) -> HttpResponse:
    sort = request.GET.get("sort", "name")
    descending = request.GET.get("dir") == "desc"
    state, name = request.GET.get("state", ""), request.GET.get("q", "")
    rows = present.chosen(await current_fleet().rows(), sort=sort, descending=descending, state=state, name=name)
    query = {"sort": sort, "dir": "desc" if descending else "asc", "state": state, "q": name}
    context = {
        "rows": [present.shown(row) for row in rows],
        "query": query,
        "states": STATES,
        "visitor": visitor,
        "columns": COLUMNS,
        "read_at": present.clock(rows[0].read_at if rows else None),
    }
    if request.GET.get("fragment") == "rows":
        return page(request, "fleet_rows.html", context)
    return page(request, "fleet.html", context)


@guarded
async def persona_page(request: HttpRequest, visitor: Visitor, name: str) -> HttpResponse:
    fleet = current_fleet()
    detail = await fleet.detail(name)
    if detail is None:
        raise Http404
    scale = "hour" if request.GET.get("scale") == "hour" else "minute"
    audit = await asyncio.to_thread(actions.audit_lines, name) if fleet.can_act else []
    context = {
        "row": present.shown(detail.row),
        "detail": detail,
        "scale": scale,
        "charts": workload_charts(detail.overview, detail.memory, scale),
        "failures": [{**each, "finished": present.clock(each["finished_at"])} for each in detail.overview["failures"]],
        "schedules": [
            {**each, "next_fire": present.clock(each["next_fire_at"]), "next_fire_in": present.ago(each["next_fire_at"])}
            for each in detail.overview["schedules"]
        ],
        "audit": [{**line, "when": present.clock(line["at"])} for line in audit] if fleet.can_act else [],
        "visitor": visitor,
        "can_act": fleet.can_act,
    }
    if request.GET.get("fragment") == "body":
        return page(request, "persona_body.html", context)
    return page(request, "persona.html", context)


@guarded
async def persona_metrics(request: HttpRequest, visitor: Visitor, name: str) -> HttpResponse:
    """The worker's own metrics, read for the operator (a browser sends no key)."""
    fleet = current_fleet()
    if name not in fleet.names():
        raise Http404
    text = await fleet.metrics(name)
    if text is None:
        return refused(request, 503, f"Persona {name} is asleep; its metrics are its worker's, read while it runs.")
    return HttpResponse(text, content_type="text/plain; charset=utf-8", headers=HEADERS)


@guarded
async def act(request: HttpRequest, visitor: Visitor, name: str) -> HttpResponse:
    """GET: the confirmation of an action; POST: the action, then back to the persona."""
    fleet = current_fleet()
    source = request.GET if request.method == "GET" else request.POST
    action = actions.ACTIONS.get(source.get("action", ""))
    target = source.get("target") or None
    if not isinstance(fleet, WakerFleet) or fleet.worker(name) is None:
        raise Http404
    if action is None or (action.needs_target and not (target and actions.TARGET.fullmatch(target))):
        return refused(request, 400, "No such action, or it names no schedule, job or page it can take.")
    question = action.question.format(persona=name, target=target)
    if request.method == "GET":
        return page(request, "confirm.html", {"action": action, "target": target, "question": question, "name": name, "visitor": visitor})
    if request.method != "POST":
        return refused(request, 405, "Use GET to ask, POST to do.")
    if not auth.csrf_ok(request, visitor):
        return refused(request, 403, "This form is not the console's own (its CSRF token does not match); nothing was done.")
    if action.confirmed and visitor.session is not None and source.get("confirm") != "yes":
        return refused(request, 400, "The action was not confirmed; nothing was done.")
    force = source.get("force") == "yes"
    record = {"who": visitor.who, "address": visitor.address, "persona": name, "action": action.name, "target": target}
    try:
        outcome = await actions.perform(fleet.worker(name), fleet.supervisor.http, action.name, target, force)
    except actions.ActionNotDone as error:
        actions.audit(**record, outcome="refused", detail=str(error))
        return page(request, "done.html", {"name": name, "message": str(error), "ok": False}, 409)
    actions.audit(**record, outcome="done", detail=outcome.message + (" (forced)" if force else ""))
    if outcome.redirect:
        return HttpResponseRedirect(outcome.redirect)
    return page(request, "done.html", {"name": name, "message": outcome.message, "ok": True})


@guarded
async def jobs_page(request: HttpRequest, visitor: Visitor) -> HttpResponse:
    fleet = current_fleet()
    query = dict(request.GET.items())
    context: dict[str, Any] = {"query": query, "visitor": visitor, "names": fleet.names(), "job_states": JOB_STATES}
    # With nothing chosen (the first visit, or Search on an empty form) the
    # page shows the search of everything: the newest jobs across the fleet.
    context["newest"] = not any(value.strip() for value in query.values())
    try:
        found = await searched(query, fleet)
    except SearchInvalid as error:
        return page(request, "jobs.html", {**context, "error": str(error)}, 400)
    context["found"] = found
    context["hits"] = [
        {**job, "accepted": present.clock(job["accepted_at"]), "finished": present.clock(job["finished_at"])}
        for job in found["jobs"]
    ]
    return page(request, "jobs.html", context)


async def static(request: HttpRequest, name: str) -> HttpResponse:
    """The console's own CSS and JavaScript (no CDN, no chart library)."""
    if name not in STATIC_TYPES:
        raise Http404
    return HttpResponse(
        (STATIC / name).read_bytes(),
        content_type=STATIC_TYPES[name],
        headers={"Cache-Control": "max-age=300", "X-Content-Type-Options": "nosniff"},
    )
