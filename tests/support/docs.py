"""One runner for every document whose examples the suite runs.

A document's fenced blocks are read in order:

- a `bash` or `python` block runs, unless the line before it is
  `<!-- not run: why -->` (the reason is required);
- a `json` or plain block right after a run block (prose between is fine, no
  other block) is that run's shown output; any other one is marked
  `<!-- not run: why -->` too, or the document fails;
- a block after `<!-- file: PATH -->` is written to PATH (in the run's
  folder) before the next runs, and is not run.

Shell blocks run with bash, one after another, in a throwaway folder that
looks like the checkout (every top-level entry linked, `store` the worker's
store), their variables carried from one block to the next. Python blocks run
in one namespace per document, in the same folder; an expression followed by
a `# …` comment that reads as a value is compared with what it answers.

Shown output is compared by shape: a shell block's output holds a JSON value
for each one shown (in a following block or as `# {…}` comments in the
block), in order; keys must be the same (`…` stands for more), `success`,
`state`, `status` and booleans equal, and other values of the same type,
so ids and times need not match. The document's addresses
(`127.0.0.1:5000` and others) are mapped to the test's own before a block runs.
"""

from __future__ import annotations

import ast
import contextlib
import io
import json
import os
import re
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.worker import ROOT, WorkerProcess

FENCE = re.compile(
    r"(?:^<!-- (?P<marker>not run|file): ?(?P<note>[^\n]*?) -->\n)?^(?P<indent> *)```(?P<lang>\w*)\n"
    r"(?P<code>.*?)\n(?P=indent)```[ \t]*$",
    re.S | re.M,
)
RUN = {"bash": "shell", "sh": "shell", "shell": "shell", "python": "python"}
EXACT_KEYS = {"success", "state", "status", "browser_state", "stopped_because", "mode"}
STATE_WORDS = {"queued", "running", "done", "failed", "cancelled", "timed_out", "interrupted", "asleep", "awake"}
MORE = "…"  # a shown value stands for more (keys, items) or anything (a value)


@dataclass
class Block:
    line: int
    lang: str
    code: str
    marker: str | None = None  # "not run" or "file"
    note: str = ""
    output_of: Block | None = None  # a shown output: the run block it shows

    @property
    def runs(self) -> bool:
        return self.lang in RUN and self.marker is None

    def where(self, doc: Path) -> str:
        return f"{doc.relative_to(ROOT)}:{self.line}"


def read_blocks(doc: Path) -> list[Block]:
    text = doc.read_text()
    found: list[Block] = []
    last_run: Block | None = None
    for match in FENCE.finditer(text):
        indent = len(match["indent"])
        code = "\n".join(line[indent:] for line in match["code"].split("\n"))
        block = Block(
            text.count("\n", 0, match.start("indent")) + 1,
            match["lang"],
            code,
            match["marker"],
            (match["note"] or "").strip(),
        )
        where = block.where(doc)
        if block.marker == "not run":
            assert block.note, f"{where}: a block marked not run must say why"
        elif block.marker == "file":
            assert block.note, f"{where}: a file block must name its path"
        elif not block.runs:
            assert last_run is not None, (
                f"{where}: a {block.lang or 'plain'} block that is neither a run's output nor marked "
                f"`<!-- not run: why -->`:\n{block.code[:300]}"
            )
            block.output_of = last_run
        found.append(block)
        last_run = block if block.runs else None
    return found


# --- shapes ---------------------------------------------------------------------------------------


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
    """The `# {…}` comments of a shell block: what its commands print."""
    found = []
    for line in code.split("\n"):
        stripped = line.strip()
        if stripped.startswith("# {") or stripped.startswith("# ["):
            try:
                found.append(json.loads(lenient(stripped[2:])))
            except json.JSONDecodeError:
                pass  # prose that starts with a brace
    return found


def shown_in_output(block: Block) -> tuple[list[Any], list[int]]:
    """(the JSON values, the HTTP statuses) a shown output block holds."""
    text = lenient(block.code)
    statuses = [int(m[1]) for m in re.finditer(r"^HTTP/[\d.]+ (\d{3})", block.code, re.M)]
    return json_values(text), statuses


# --- running ---------------------------------------------------------------------------------------


@dataclass
class Ran:
    ran: list[Block] = field(default_factory=list)
    not_run: list[Block] = field(default_factory=list)
    compared: int = 0


@dataclass
class DocRun:
    """Runs one document's blocks in order, in `home` (made to look like the checkout)."""

    doc: Path
    home: Path
    store: Path
    env: dict[str, str]
    addresses: dict[str, str]  # the document's host:port -> the test's
    timeout_s: float = 120
    namespace: dict[str, Any] = field(default_factory=dict)  # the Python blocks' globals

    def __post_init__(self) -> None:
        self.place = self.home / "checkout"
        self.place.mkdir(parents=True, exist_ok=True)
        for entry in ROOT.iterdir():
            if entry.name not in ("store", ".git") and not (self.place / entry.name).exists():
                (self.place / entry.name).symlink_to(entry)
        if not (self.place / "store").exists():
            (self.place / "store").symlink_to(self.store)
        self.state = self.home / "shell-state"
        self.state.write_text("")
        self.namespace.setdefault("__name__", "__doc__")

    def mapped(self, code: str) -> str:
        for theirs, ours in self.addresses.items():
            code = code.replace(theirs, ours)
        return code

    def run(self) -> Ran:
        done = Ran()
        outputs: dict[int, str] = {}
        for block in read_blocks(self.doc):
            where = block.where(self.doc)
            if block.marker == "file":
                target = self.place / block.note
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(self.mapped(block.code) + "\n")
            elif block.output_of is not None:
                shown, statuses = shown_in_output(block)
                printed = outputs[id(block.output_of)]
                self.check(where, shown, json_values(printed), printed)
                got = [int(m[1]) for m in re.finditer(r"^HTTP/[\d.]+ (\d{3})", printed, re.M)]
                assert statuses == got[: len(statuses)], f"{where}: shown statuses {statuses}, got {got}\n{printed}"
                done.compared += 1
            elif block.runs:
                if RUN[block.lang] == "shell":
                    printed = self.shell(block, where)
                    shown = shown_in_block(block.code)
                    if shown:
                        self.check(where, shown, json_values(printed), printed)
                        done.compared += 1
                else:
                    printed, compared = self.python(block, where)
                    done.compared += compared
                outputs[id(block)] = printed
                done.ran.append(block)
            else:
                done.not_run.append(block)
        return done

    def check(self, where: str, shown: list[Any], actual: list[Any], printed: str) -> None:
        assert len(actual) >= len(shown), (
            f"{where}: the document shows {len(shown)} answers, the run printed {len(actual)}:\n{printed[-3000:]}"
        )
        for index, value in enumerate(shown):
            problems = compare(value, actual[index])
            assert not problems, (
                f"{where}: answer {index + 1} differs from the document:\n"
                + "\n".join(problems)
                + f"\n{json.dumps(actual[index])[:2000]}"
            )

    def shell(self, block: Block, where: str) -> str:
        script = f"set -a\n. {self.state}\nset -euo pipefail\n{self.mapped(block.code)}\nexport -p > {self.state}\n"
        finished = subprocess.run(
            ["bash", "-c", script],
            cwd=self.place,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=self.timeout_s,
        )
        assert finished.returncode == 0, (
            f"{where}: exit {finished.returncode}\n{block.code}\n--- stdout\n{finished.stdout[-4000:]}\n"
            f"--- stderr\n{finished.stderr[-4000:]}"
        )
        return finished.stdout

    def python(self, block: Block, where: str) -> tuple[str, int]:
        """Run each statement; an expression followed by a comment that reads
        as a value is compared with that value. Answers (printed, compared)."""
        code = self.mapped(block.code)
        lines = code.split("\n")
        tree = ast.parse(code, filename=where)
        printed = io.StringIO()
        compared = 0
        before = Path.cwd()
        os.chdir(self.place)
        try:
            with contextlib.redirect_stdout(printed):
                for index, statement in enumerate(tree.body):
                    following = tree.body[index + 1].lineno - 1 if index + 1 < len(tree.body) else len(lines)
                    shown = shown_after(lines[statement.end_lineno : following])
                    if isinstance(statement, ast.Expr):
                        value = eval(compile(ast.Expression(statement.value), where, "eval"), self.namespace)
                        if shown is not None:
                            problems = compare(shown, value)
                            assert not problems, (
                                f"{where}, line {statement.lineno}: " + "\n".join(problems) + (f"\n{value!r:.2000}")
                            )
                            compared += 1
                    else:
                        exec(compile(ast.Module([statement], []), where, "exec"), self.namespace)
        finally:
            os.chdir(before)
        return printed.getvalue(), compared


def shown_after(lines: list[str]) -> Any:
    """The value a statement's following comment shows, if it reads as one."""
    comments = []
    for line in lines:
        stripped = line.strip()
        if not stripped.startswith("#"):
            break
        comments.append(stripped[1:].strip())
    if not comments:
        return None
    try:
        return python_value(comments[0])
    except ValueError:
        return None


def run_document(doc: Path, tmp: Path, *, store: Path, env: dict[str, str], addresses: dict[str, str], **run) -> Ran:
    """Run every block of `doc`; fail on the first that fails or differs.
    `namespace=`, a dict of the test's, holds the Python blocks' globals (to
    shut down what a block left running, even when a later one fails)."""
    home = tmp / "home"
    home.mkdir(exist_ok=True)
    shell_env = {**os.environ}
    for name in ("PYTHONPATH", "DJANGO_SETTINGS_MODULE", "PENELOPE_KEY", "PENELOPE_PLUGINS"):
        shell_env.pop(name, None)
    # The run's folder links manage.py, whose own folder Python resolves to the
    # checkout: PYTHONPATH puts a module saved "beside manage.py" there too.
    shell_env.update({"HOME": str(home), "PYTHONPATH": ".", **env})
    shell_env["PENELOPE_STORE"] = str(store)
    return DocRun(doc, home, store, shell_env, addresses, **run).run()


@contextlib.contextmanager
def documented_worker(store: Path, **env: str) -> Iterator[WorkerProcess]:
    """A worker as the documents start it: default settings and a key it makes
    itself (`store/key`), with the demo family's pauses shortened."""
    worker = WorkerProcess(store, env={"DEMO_PAUSE_MS": "50", **env}, key="").start()
    worker.key = (store / "key").read_text().strip()
    try:
        yield worker
    finally:
        worker.stop()
