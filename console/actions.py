"""What an operator may do from the console, each confirmed first and each
written to the audit (a JSON line in `console-audit.jsonl` beside the
personas file, and a line of the waker's log): start or stop a worker,
pause or resume a schedule, cancel a job, and open a live view of a page.

Start and stop are the waker's own (as its API's). The others are calls to
the persona's worker with its key, like any request the waker forwards; a
sleeping worker is woken for them, since the operator asked for a change.
"""

from __future__ import annotations

import json
import logging
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from django.conf import settings

from waker.persona_worker import PersonaWorker, WorkInFlight
from waker.process import StartFailed

log = logging.getLogger("penelope.waker.console")

AUDIT_FILE = "console-audit.jsonl"
# What an action names: a schedule's or a job's id, a page's name.
TARGET = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
AUDIT_SHOWN = 20
# How much of the audit's end a page reads for them.
AUDIT_TAIL_BYTES = 256 * 1024


@dataclass(frozen=True)
class Action:
    name: str
    question: str  # the confirmation's, with {persona} and {target}
    needs_target: bool
    confirmed: bool = True  # a change asks first; opening a live view does not


ACTIONS = {
    action.name: action
    for action in (
        Action("start", "Start persona {persona}'s worker?", False),
        Action("stop", "Stop persona {persona}'s worker? It is refused while work is in flight unless forced.", False),
        Action("pause", "Pause schedule {target} of persona {persona}? It fires no more until resumed.", True),
        Action("resume", "Resume schedule {target} of persona {persona}?", True),
        Action("cancel", "Cancel job {target} of persona {persona}?", True),
        Action("watch", "Open a live view of page {target} of persona {persona}.", True, confirmed=False),
    )
}


class ActionNotDone(Exception):
    """The action did not happen; the sentence says why, for the operator."""


@dataclass(frozen=True)
class Outcome:
    message: str
    redirect: str | None = None  # where the operator goes next (a live view)


def audit_path() -> Path:
    return Path(settings.WAKER_PERSONAS).parent / AUDIT_FILE


def audit(*, who: str, address: str, persona: str, action: str, target: str | None, outcome: str, detail: str) -> None:
    line = {
        "at": round(time.time(), 3),
        "who": who,
        "address": address,
        "persona": persona,
        "action": action,
        "target": target,
        "outcome": outcome,
        "detail": detail,
    }
    with audit_path().open("a") as file:
        file.write(json.dumps(line) + "\n")
    log.info("console: %s from %s: %s %s%s: %s (%s)", who, address, action, persona, f" {target}" if target else "", outcome, detail)


def audit_lines(persona: str | None = None, count: int = AUDIT_SHOWN) -> list[dict[str, Any]]:
    """The newest audit lines, of one persona or all, newest first: from the
    file's last AUDIT_TAIL_BYTES only, so a long audit costs a page no more
    than a short one (a persona's page reads it at every refresh)."""
    try:
        with audit_path().open("rb") as file:
            start = max(0, file.seek(0, os.SEEK_END) - AUDIT_TAIL_BYTES)
            file.seek(start)
            tail = file.read().decode(errors="replace").splitlines()
    except FileNotFoundError:
        return []
    if start:
        tail = tail[1:]  # the line the seek cut
    lines = []
    for text in reversed(tail):
        try:
            line = json.loads(text)
        except ValueError:
            continue  # a line being written
        if persona is None or line["persona"] == persona:
            lines.append(line)
            if len(lines) == count:
                break
    return lines


async def perform(worker: PersonaWorker, http: httpx.AsyncClient, action: str, target: str | None, force: bool) -> Outcome:
    """Do the action; ActionNotDone with the reason when it cannot be done."""
    name = worker.persona.name
    try:
        if action == "start":
            await worker.ensure_running()
            return Outcome(f"Persona {name}'s worker is running.")
        if action == "stop":
            await worker.stop(force=force)
            return Outcome(f"Persona {name}'s worker is stopped.")
        if action == "watch" and worker.state != "running":
            raise ActionNotDone(f"Persona {name} is asleep: a live view needs its worker running; start it first.")
        await worker.ensure_running()
    except StartFailed as error:
        raise ActionNotDone(f"Persona {name}'s worker did not start: {error.message}") from None
    except WorkInFlight as error:
        raise ActionNotDone(error.message) from None
    method, path, body = {
        "pause": ("PATCH", f"/schedules/{target}", {"paused": True}),
        "resume": ("PATCH", f"/schedules/{target}", {"paused": False}),
        "cancel": ("POST", f"/jobs/{target}/cancel", None),
        "watch": ("POST", f"/{target}/live", {}),
    }[action]
    with worker.forwarding():
        try:
            answer = await http.request(
                method, worker.persona.api_url + path, json=body, headers=worker.auth_headers(), timeout=30
            )
            said = answer.json()
        except (httpx.HTTPError, ValueError) as error:
            raise ActionNotDone(f"Persona {name}'s worker did not answer: {error.__class__.__name__}.") from None
    if answer.status_code >= 400:
        raise ActionNotDone(f"Persona {name}'s worker said {answer.status_code}: {said.get('error', '')}")
    if action == "watch":
        return Outcome(f"A live view of page {target} is open.", redirect=f"/w/{name}{said['url']}")
    done = {"pause": "paused", "resume": "resumed", "cancel": "cancelled"}[action]
    return Outcome(f"{'Schedule' if action != 'cancel' else 'Job'} {target} is {done}.")
