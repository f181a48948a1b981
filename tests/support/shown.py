"""What the docs runner (tests/support/docs.py) compares: a document's shown
answers against what its blocks printed, by shape.

A JSON answer: keys must be the same (`…` stands for more), `success`,
`state`, `status`, `page_id` and booleans equal, and other values of the same type, so
ids and times need not match. Plain text: line by line, `…` for what varies."""

from __future__ import annotations

import ast
import json
import re
from typing import Any

EXACT_KEYS = {"success", "state", "status", "browser_state", "stopped_because", "mode", "page_id"}
STATE_WORDS = {"queued", "running", "done", "failed", "cancelled", "timed_out", "interrupted", "asleep", "awake"}
MORE = "…"  # a shown value stands for more (keys, items) or anything (a value)


def lenient(text: str) -> str:
    """`text` with each bare `…` (outside strings) made a value a parser takes:
    a key `"…"` in an object, the string `"…"` in a list or as a value."""
    out: list[str] = []
    stack: list[str] = []
    quote: str | None = None
    escaped = False
    previous = ""  # the last character outside a string that was not a space
    for char in text:
        if quote:
            out.append(char)
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == quote:
                quote = None
                previous = '"'
            continue
        if char in "\"'":
            quote = char
        elif char in "{[(":
            stack.append(char)
        elif char in "}])" and stack:
            stack.pop()
        if char == MORE:
            in_object = stack and stack[-1] == "{" and previous in "{,"
            out.append('"…": null' if in_object else '"…"')
            previous = '"'
            continue
        out.append(char)
        if not char.isspace():
            previous = char
    return "".join(out)


def json_values(text: str) -> list[Any]:
    """Every JSON object or list in `text`, in order (curl prints no newline
    between answers; other lines are skipped)."""
    decoder = json.JSONDecoder()
    values, at = [], 0
    while True:
        starts = [i for i in (text.find("{", at), text.find("[", at)) if i >= 0]
        if not starts:
            return values
        at = min(starts)
        try:
            value, end = decoder.raw_decode(text, at)
        except json.JSONDecodeError:
            at += 1
            continue
        values.append(value)
        at = end


def python_value(text: str) -> Any:
    """A shown Python value (`{'a': 1, …}`), or raise ValueError."""
    made = lenient(text).replace(": null", ": None")
    try:
        return ast.literal_eval(made)
    except (SyntaxError, ValueError) as error:
        raise ValueError(text) from error


def compare(shown: Any, actual: Any, path: str = "$", key: str = "") -> list[str]:
    """What differs in shape between a shown value and the real one."""
    if shown == MORE:
        return []
    if isinstance(shown, dict):
        if not isinstance(actual, dict):
            return [f"{path}: shown an object, got {actual!r:.120}"]
        problems = []
        named = [k for k in shown if k != MORE]
        missing = [k for k in named if k not in actual]
        if missing:
            problems.append(f"{path}: missing keys {missing} (it has {sorted(actual)})")
        if MORE not in shown:
            extra = sorted(set(actual) - set(shown))
            if extra:
                problems.append(f"{path}: keys the document does not show: {extra}")
        for k in named:
            if k in actual:
                problems += compare(shown[k], actual[k], f"{path}.{k}", k)
        return problems
    if isinstance(shown, (list, tuple)):
        if not isinstance(actual, (list, tuple)):
            return [f"{path}: shown a list, got {actual!r:.120}"]
        if MORE not in shown and len(shown) != len(actual):
            return [f"{path}: shown {len(shown)} items, got {len(actual)}"]
        placed = list(shown[: shown.index(MORE)]) if MORE in shown else list(shown)  # items after a `…` float
        problems = []
        for index, item in enumerate(placed):
            if index >= len(actual):
                return problems + [f"{path}: shown at least {len(placed)} items, got {len(actual)}"]
            problems += compare(item, actual[index], f"{path}[{index}]", key)
        return problems
    if isinstance(shown, bool) or isinstance(actual, bool) or key in EXACT_KEYS:
        return [] if shown == actual else [f"{path}: shown {shown!r}, got {actual!r}"]
    if shown is None or actual is None:
        return [] if shown is actual else [f"{path}: shown {shown!r}, got {actual!r:.120}"]
    if isinstance(shown, str) and shown in STATE_WORDS:
        return [] if shown == actual else [f"{path}: shown {shown!r}, got {actual!r}"]
    same = (isinstance(shown, (int, float)) and isinstance(actual, (int, float))) or type(shown) is type(actual)
    return [] if same else [f"{path}: shown {shown!r:.60} ({type(shown).__name__}), got {actual!r:.60}"]


def shown_in_block(code: str) -> list[Any]:
    """The `# {…}` comments of a shell block, what its commands print: one a
    line, or one over several comment lines. A comment that starts a JSON
    value and never reads as one fails: it would show nothing."""
    found, lines, skip_to = [], code.split("\n"), 0
    for index, line in enumerate(lines):
        stripped = line.strip()
        if index < skip_to or not (stripped.startswith("# {") or stripped.startswith("# [")):
            continue
        text, end = stripped[2:], index + 1
        while True:
            try:
                found.append(json.loads(lenient(text)))
                break
            except json.JSONDecodeError:
                if end == len(lines) or not lines[end].strip().startswith("#"):
                    raise AssertionError(f"a shown answer that does not read as JSON:\n{stripped}") from None
                text += "\n" + lines[end].strip()[1:]
                end += 1
        skip_to = end
    return found


# What varies from run to run in a line of text: an id (16 hex digits or
# more), a number (a pid, a time, a count).
VARYING = re.compile(r"\b[0-9a-f]{16,}\b|\d+(?:\.\d+)?")


def masked(text: str) -> str:
    """A pattern for a shown piece of text, its ids and numbers any others."""
    pieces, at = [], 0
    for match in VARYING.finditer(text):
        number = match[0].replace(".", "").isdigit() and len(match[0]) < 16
        pieces += [re.escape(text[at : match.start()]), r"\d+(?:\.\d+)?" if number else "[0-9a-f]+"]
        at = match.end()
    return "".join([*pieces, re.escape(text[at:])])


def text_differs(shown: str, printed: str) -> str | None:
    """Why a plain shown output is not what its run printed, or None. Line by
    line and in order, ids and numbers masked: `…` in a line stands for any
    text, a line that is only `…` for any lines (an excerpt); without one,
    the run printed those lines and no others."""
    lines, at = printed.splitlines(), 0
    wanted = shown.splitlines()
    for line in wanted:
        if line == MORE:
            continue
        pattern = re.compile(".*".join(masked(part) for part in line.split(MORE)))
        while at < len(lines) and not pattern.fullmatch(lines[at]):
            at += 1
        if at == len(lines):
            return f"the run printed no {line!r} here"
        at += 1
    if MORE not in wanted and len(lines) != len(wanted):
        return f"the run printed {len(lines)} lines, the document shows {len(wanted)}"
    return None
