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

Shown output is compared by shape (tests/support/shown.py): a shell block's
output holds a JSON value for each one shown (in a following block, or as
`# {…}` comments in the block, on one line or several), in order, and the
`HTTP/1.1 NNN` lines shown; a plain shown output with neither is compared
line by line, `…` for what varies.

A block runs as written: the worker's port is never written into it. The
documents build every address of the worker on `PENELOPE_PORT` (the
README's `WORKER` and `BASE`, a script's `os.environ`), 5000 when unset, and
those of the waker on `WAKER_PORT`, 5100 when unset; the test sets them to
its own processes' ports, which are not those. The test's `env` is the
reader's environment, for the shell blocks and, while the document runs,
the Python ones. So a block, or a file written from one, that still names
a default port in a loopback address (`127.0.0.1:5000`, outside its
comments; DEFAULT_PORT) fails the document before anything runs, save in
the documents of KEEPS_ITS_MAP. A guide that goes on from the README's
quick start (its `WORKER`, `BASE`, `KEY`, `AUTH`) runs that block first
(`after_readme=True`). Other addresses a document names (a webhook
receiver's port, a persona's in a personas file, a folder) may still be
mapped to the test's own (`addresses`) before a block runs, in the paths
of its files and in its plain shown outputs. A shown output needs no port
mapped: a URL in a JSON answer is compared by shape, and the numbers of a
plain one are masked.
"""

from __future__ import annotations

import ast
import contextlib
import io
import json
import os
import re
import subprocess
import tokenize
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.worker import ROOT, WorkerProcess, free_port
from tests.support.shown import compare, json_values, lenient, python_value, shown_in_block, text_differs

FENCE = re.compile(
    r"(?:^<!-- (?P<marker>not run|file): ?(?P<note>[^\n]*?) -->\n)?^(?P<indent> *)```(?P<lang>\w*)\n"
    r"(?P<code>.*?)\n(?P=indent)```[ \t]*$",
    re.S | re.M,
)
RUN = {"bash": "shell", "sh": "shell", "shell": "shell", "python": "python"}
# The worker's and the waker's default ports, written into a loopback
# address (`127.0.0.1:5000`, `ws://localhost:5000`, `127.0.0.1:5100`): a
# reader on another port would reach whatever listens there.
# `${PENELOPE_PORT:-5000}` and `"5000"` are defaults, not this, and a
# cluster's Service (`…svc.cluster.local:5000`, SCALING.md) has that port
# in every deployment.
DEFAULT_PORT = re.compile(r"(?:127\.0\.0\.1|localhost):(?:5000|5100)(?!\d)")
# Documents whose blocks keep the default port, mapped by their test.
KEEPS_ITS_MAP = {
    # The user guide of the jobs contract (/work/shared/spec/USING_JOBS.md),
    # whose examples are the contract's: its test maps its addresses.
    "docs/guides/USING_JOBS.md",
}


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


def without_comments(block: Block) -> str:
    """A run or file block's code without its comments, which may show an
    answer (`# {"url":"http://127.0.0.1:5000"}`) or state a default: a
    Python block's by its tokens, a shell block's whole-line comments and
    what follows ` # ` on a line."""
    lines = block.code.split("\n")
    if block.lang == "python":
        try:
            tokens = list(tokenize.generate_tokens(io.StringIO(block.code).readline))
        except (tokenize.TokenError, SyntaxError):
            return block.code
        for token in tokens:
            if token.type == tokenize.COMMENT:
                row, column = token.start
                lines[row - 1] = lines[row - 1][:column]
        return "\n".join(lines)
    kept = []
    for line in lines:  # a line stays a line, so that where names it
        kept.append("" if line.lstrip().startswith(("#", "//")) else line.split(" # ", 1)[0].split(" // ", 1)[0])
    return "\n".join(kept)


def default_port_in(doc: Path, blocks: list[Block]) -> list[str]:
    """Where a block that runs, or is written to a file, names the worker's
    or the waker's default port in an address (DEFAULT_PORT): `where: line`
    for each."""
    found = []
    for block in blocks:
        if block.runs or block.marker == "file":
            for offset, line in enumerate(without_comments(block).split("\n")):
                if DEFAULT_PORT.search(line):
                    found.append(f"{doc.relative_to(ROOT)}:{block.line + 1 + offset}: {line.strip()}")
    return found


def readme_variables() -> str:
    """The README quick start's block that sets `WORKER`, `BASE`, `KEY` and
    `AUTH`, which the guides go on from."""
    for block in read_blocks(ROOT / "README.md"):
        if block.runs and re.search(r"^BASE=", block.code, re.M):
            return block.code
    raise AssertionError("README.md: no block sets BASE")


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
    addresses: dict[str, str]  # the document's other addresses (not the worker's) -> the test's
    prelude: str = ""  # shell code run before the document's first block (the README's variables)
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
        """`code` with the document's addresses made the test's, in one pass
        (a port mapped is never mapped again), longest first."""
        if not self.addresses:
            return code
        theirs = sorted(self.addresses, key=len, reverse=True)
        return re.sub("|".join(map(re.escape, theirs)), lambda match: self.addresses[match[0]], code)

    def run(self) -> Ran:
        done = Ran()
        outputs: dict[int, str] = {}
        blocks = read_blocks(self.doc)
        if str(self.doc.relative_to(ROOT)) not in KEEPS_ITS_MAP:
            written = default_port_in(self.doc, blocks)
            assert not written, (
                "blocks that name a default port: build the address on PENELOPE_PORT (the README's "
                "WORKER and BASE) or WAKER_PORT, so that a reader on another port runs them as written:\n"
                + "\n".join(written)
            )
            mapped = [address for address in self.addresses if DEFAULT_PORT.search(address)]
            assert not mapped, f"{self.doc.name}: the worker's and the waker's ports are set, not mapped: {mapped}"
        if self.prelude:
            self.shell(Block(0, "bash", self.prelude), f"{self.doc.name}, before its blocks")
        for block in blocks:
            where = block.where(self.doc)
            if block.marker == "file":
                target = self.place / self.mapped(block.note)
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(self.mapped(block.code) + "\n")
            elif block.output_of is not None:
                shown, statuses = shown_in_output(block)
                printed = outputs[id(block.output_of)]
                if not block.lang and not shown and not statuses:  # plain text: line by line
                    problem = text_differs(self.mapped(block.code), printed)
                    assert problem is None, f"{where}: {problem}:\n{printed[-3000:]}"
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
                + f"\n{json.dumps(actual[index])[:2000]}\n--- printed\n{printed[-2000:]}"
            )

    def shell(self, block: Block, where: str) -> str:
        """Run a shell block; answers what it printed, its errors among it as a
        terminal shows them."""
        script = f"set -a\n. {self.state}\nset -euo pipefail\n{self.mapped(block.code)}\nexport -p > {self.state}\n"
        finished = subprocess.run(
            ["bash", "-c", script], cwd=self.place, env=self.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            text=True, errors="replace", timeout=self.timeout_s,
        )  # fmt: skip
        assert finished.returncode == 0, (
            f"{where}: exit {finished.returncode}\n{block.code}\n--- printed\n{finished.stdout[-6000:]}"
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


def run_document(
    doc: Path,
    tmp: Path,
    *,
    store: Path,
    env: dict[str, str],
    addresses: dict[str, str] | None = None,
    after_readme: bool = False,
    **run,
) -> Ran:
    """Run every block of `doc`; fail on the first that fails or differs.
    `env` is the reader's environment (`PENELOPE_PORT`, the worker's port,
    never 5000; `WAKER_PORT`, never 5100), for the shell blocks and, while
    the document runs, the Python ones; `after_readme` runs the README's
    `WORKER`, `BASE`, `KEY` and `AUTH` first. `namespace=`, a dict of the test's, holds the Python blocks'
    globals (to shut down what a block left running, even when a later one
    fails)."""
    assert env.get("PENELOPE_PORT") != "5000", "the docs run on a port that is not the default"
    assert env.get("WAKER_PORT") != "5100", "the docs run on a port that is not the default"
    home = tmp / "home"
    home.mkdir(exist_ok=True)
    shell_env = {**os.environ}
    for name in ("PYTHONPATH", "DJANGO_SETTINGS_MODULE", "PENELOPE_KEY", "PENELOPE_PLUGINS"):
        shell_env.pop(name, None)
    # The run's folder links manage.py, whose own folder Python resolves to the
    # checkout: PYTHONPATH puts a module saved "beside manage.py" there too.
    shell_env.update({"HOME": str(home), "PYTHONPATH": ".", **env})
    shell_env["PENELOPE_STORE"] = str(store)
    prelude = readme_variables() if after_readme else ""
    with environment(env):
        return DocRun(doc, home, store, shell_env, addresses or {}, prelude, **run).run()


@contextlib.contextmanager
def environment(env: dict[str, str]) -> Iterator[None]:
    """This process's environment with `env` set, as it was afterwards: the
    Python blocks run here, and read it as a reader's script would."""
    before = {name: os.environ.get(name) for name in env}
    os.environ.update(env)
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


@contextlib.contextmanager
def documented_worker(store: Path, **env: str) -> Iterator[WorkerProcess]:
    """A worker as the documents start it: default settings and a key it makes
    itself (`store/key`), with the demo family's pauses shortened."""
    worker = WorkerProcess(store, env={"DEMO_PAUSE_MS": "50", **env}, key="")
    while worker.port == 5000:  # the documents must not run on the default port by chance
        worker.port = free_port()
    worker.start()
    worker.key = (store / "key").read_text().strip()
    try:
        yield worker
    finally:
        worker.stop()
