"""The house rules a reader relies on, checked in-process from the source:
no module of the project over 400 lines (but the few one concept needs,
each listed with its reason here and in docs/design/LAYOUT.md), no import circle between its
modules (imports under `if TYPE_CHECKING:` and inside functions count too),
no private name of a framework outside the seams (core/seams/), and one
list of the words the API's paths take from page ids."""

from __future__ import annotations

import ast
import importlib.util
import re
import sys
from collections.abc import Iterator
from functools import cache
from pathlib import Path

from harness.worker import ROOT

MAX_LINES = 400
# Modules that may pass MAX_LINES because one concept needs the length, not
# because nobody split them: each with its reason, which docs/design/LAYOUT.md
# ("Past 400 lines") gives too. One line a module.
PAST_MAX_LINES = {
    "browser/broker.py": "the one owner of who holds a page: claims, waiters, openings, leases, driver holds, one rebalance",
    "plugins/signing_in.py": "a credential's values reach its own origin's form and no record: one guarantee",
}
# Not the project's source: environments, caches, build output, stores.
SKIPPED_DIRS = {"__pycache__", "node_modules", "build", "dist", "store", "stores"}


def python_files() -> Iterator[Path]:
    """Every .py file of the project, the suite's included."""
    for path in sorted(ROOT.rglob("*.py")):
        parts = path.relative_to(ROOT).parts[:-1]
        if any(part.startswith(".") or part in SKIPPED_DIRS or part.endswith(".egg-info") for part in parts):
            continue
        yield path


def module_name(path: Path) -> str:
    """The dotted name Python imports `path` under: from the nearest folder up
    that is no package (the checkout, or `client/` for penelope_client)."""
    top = path.parent
    while (top / "__init__.py").exists():
        top = top.parent
    parts = list(path.relative_to(top).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


@cache
def modules() -> dict[str, Path]:
    return {module_name(path): path for path in python_files()}


def test_no_module_is_over_400_lines():
    too_long = []
    for path in python_files():
        relative = path.relative_to(ROOT)
        if relative.parts[0] == "tests" or "migrations" in relative.parts:
            continue
        lines = len(path.read_text().splitlines())
        if lines > MAX_LINES and relative.as_posix() not in PAST_MAX_LINES:
            too_long.append(f"{relative}: {lines} lines")
    assert not too_long, (
        f"modules over {MAX_LINES} lines (split them by what they do, or, where one concept needs the "
        "length, add them to PAST_MAX_LINES and to docs/design/LAYOUT.md with the reason):\n" + "\n".join(too_long)
    )


def test_every_module_past_400_lines_is_one_layout_md_names():
    """The allow-list holds only modules that exist and pass MAX_LINES, and
    LAYOUT.md names each, so neither list outlives what it excuses."""
    layout = (ROOT / "docs" / "design" / "LAYOUT.md").read_text()
    stale = [
        module
        for module in PAST_MAX_LINES
        if not (ROOT / module).is_file() or len((ROOT / module).read_text().splitlines()) <= MAX_LINES
    ]
    assert not stale, f"in PAST_MAX_LINES but gone or within {MAX_LINES} lines: {stale}"
    unnamed = [module for module in PAST_MAX_LINES if f"`{module}`" not in layout]
    assert not unnamed, f"past {MAX_LINES} lines but not named in docs/design/LAYOUT.md: {unnamed}"


def imported(name: str, path: Path) -> Iterator[tuple[str, int]]:
    """The project's modules that the module `name` (at `path`) imports, with
    the line of each import: every import statement in the file, wherever it is."""
    known = modules()
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)] if package else []
                base = ".".join([*anchor, *([base] if base else [])])
            # `from a import b` imports the module a.b when there is one, else a name of a.
            targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base for alias in node.names]
        else:
            continue
        for target in targets:
            while target and target not in known:  # `import a.b.name`: the module is a.b
                target = target.rpartition(".")[0]
            if target and target != name:
                yield target, node.lineno


def import_graph() -> dict[str, dict[str, int]]:
    """Each module: the project's modules it imports, and the line that does."""
    graph: dict[str, dict[str, int]] = {}
    for name, path in modules().items():
        edges = graph.setdefault(name, {})
        for target, line in imported(name, path):
            edges.setdefault(target, line)
    return graph


def strongly_connected(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """Tarjan's components of more than one module: each holds a circle."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for after in graph[node]:
            if after not in index:
                visit(after)
                low[node] = min(low[node], low[after])
            elif after in on_stack:
                low[node] = min(low[node], index[after])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def circle(graph: dict[str, dict[str, int]], members: list[str]) -> list[str]:
    """One shortest circle through the component's first module, as a path back to it."""
    start, inside = members[0], set(members)
    came_from: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for after in sorted(graph[node]):
                if after == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(came_from[path[-1]])
                    return [start, *reversed(path[:-1]), start]
                if after in inside and after not in came_from:
                    came_from[after] = node
                    following.append(after)
        frontier = following
    raise AssertionError(f"no circle in {members}")


def describe(graph: dict[str, dict[str, int]], path: list[str]) -> str:
    known = modules()
    steps = [
        f"  {before} imports {after} ({known[before].relative_to(ROOT)}:{graph[before][after]})"
        for before, after in zip(path, path[1:], strict=False)
    ]
    return " -> ".join(path) + "\n" + "\n".join(steps)


def test_no_import_circle():
    graph = import_graph()
    circles = [describe(graph, circle(graph, members)) for members in strongly_connected(graph)]
    assert not circles, "import circles (a TYPE_CHECKING or function-local import counts):\n" + "\n".join(circles)


# The apps' floors (docs/design/API_LAYERS.md): an app imports only from apps
# on floors below its own, so no two apps import each other, even by a path.
FLOORS = {
    "core": 0,
    "browser": 1, "media_store": 1, "waker": 1, "demo_site": 1, "credentials": 1,
    "live": 2, "console": 2,
    "plugins": 3,
    "activity": 4,
    "jobs": 5, "cdp": 5,
    "schedules": 6,
    "penelope_site": 7,
    "worker": 8,
}
# Reads of an app's own tables straight from a store's SQLite file, plain
# sqlite3 (LAYOUT.md, "Reads of a store"): the console reads a persona's store
# with them from floor 2, awake or asleep, and the overview route from floor 4.
# They stand on no floor: each imports the standard library only (checked
# below), so whoever imports one takes nothing of its app but those queries.
STORE_READS = frozenset({"activity.store_reads", "jobs.store_reads", "schedules.store_reads"})


def test_every_app_has_a_floor_and_imports_only_from_below():
    """Every app of the project (a top-level folder with Python and an
    `__init__.py`, but the tools: tests, harness, bench, client, scripts)
    has its floor, and each import of another app goes down."""
    tools = {"tests", "harness", "bench", "client", "scripts", "deploy", "docs"}
    apps = {path.parent.name for path in ROOT.glob("*/__init__.py")} - tools
    assert apps == set(FLOORS), f"apps without a floor, or floors without an app: {apps ^ set(FLOORS)}"
    upward = []
    for name, edges in import_graph().items():
        app = name.split(".")[0]
        for target, line in edges.items():
            other = target.split(".")[0]
            if target in STORE_READS:
                continue
            if app in FLOORS and other in FLOORS and other != app and FLOORS[other] >= FLOORS[app]:
                upward.append(f"{name} (floor {FLOORS[app]}) imports {target} (floor {FLOORS[other]}), line {line}")
    assert not upward, "imports that do not go down a floor:\n" + "\n".join(upward)


def test_the_store_reads_import_the_standard_library_only():
    """Each app's reads of a store file (STORE_READS, any floor may import
    them) import nothing but the standard library, anywhere in the module,
    and their package's `__init__.py`, which importing them runs, imports
    nothing at all: no Django, no model, no other app. And every module of
    that name is on the list, so a new one is held to it too."""
    known = modules()
    assert {name for name in known if name.endswith(".store_reads")} == STORE_READS
    found = []
    for name in sorted(STORE_READS):
        path = known[name]
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                tops = ["." if node.level else (node.module or "").split(".")[0]]
            elif isinstance(node, ast.Import):
                tops = [alias.name.split(".")[0] for alias in node.names]
            else:
                continue
            for top in tops:
                if top != "__future__" and top not in sys.stdlib_module_names:
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno}: imports {top}")
        package = path.parent / "__init__.py"
        if any(isinstance(node, ast.Import | ast.ImportFrom) for node in ast.walk(ast.parse(package.read_text()))):
            found.append(f"{package.relative_to(ROOT)} imports something")
    assert not found, "a store's reads import beyond the standard library:\n" + "\n".join(found)


def test_an_import_inside_a_function_says_why():
    """A project import inside a function is there only where a circle or the
    start-up demands it, and says which on its line or the comment just above."""
    silent = []
    apps = set(FLOORS)
    for name, path in modules().items():
        if name.split(".")[0] not in apps:
            continue
        lines = path.read_text().splitlines()
        for function in ast.walk(ast.parse("\n".join(lines))):
            if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            for node in ast.walk(function):
                module = node.module if isinstance(node, ast.ImportFrom) and not node.level else (
                    node.names[0].name if isinstance(node, ast.Import) else None)
                if module is None or module.split(".")[0] not in apps:
                    continue
                said = "#" in lines[node.lineno - 1] or any(
                    lines[line - 1].strip().startswith("#") for line in range(max(1, node.lineno - 3), node.lineno))
                if not said:
                    silent.append(f"{path.relative_to(ROOT)}:{node.lineno}: {lines[node.lineno - 1].strip()}")
    assert not silent, "imports inside functions without their reason:\n" + "\n".join(silent)


def test_the_circle_finder_sees_a_type_only_and_a_local_import(tmp_path, monkeypatch):
    """The finder itself, on a small package of its own: a circle closed by an
    import under `if TYPE_CHECKING:` and one closed inside a function."""
    package = tmp_path / "house"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "rooms.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from house.hall import Hall\n")
    (package / "hall.py").write_text("from house import rooms\n")
    (package / "attic.py").write_text("def up():\n    from .cellar import down\n")
    (package / "cellar.py").write_text("import house.attic\n")
    (package / "garden.py").write_text("from house.hall import rooms\n")  # not on any circle
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    modules.cache_clear()
    try:
        graph = import_graph()
        components = strongly_connected(graph)
        assert components == [["house.attic", "house.cellar"], ["house.hall", "house.rooms"]]
        assert circle(graph, components[1]) == ["house.hall", "house.rooms", "house.hall"]
        assert "house.rooms imports house.hall (house/rooms.py:3)" in describe(graph, circle(graph, components[1]))
    finally:
        modules.cache_clear()


def test_page_ids_and_routes_share_one_list_of_words():
    """The page model takes its reserved ids from core/routes.py, and they are
    exactly the first path segments the API's router uses (the HTTP routes,
    and the event socket's)."""
    from django.urls import get_resolver

    from browser import pages
    from core import routes
    from core.api import API_PREFIX

    assert pages.RESERVED_PAGE_IDS is routes.RESERVED_PAGE_IDS, "browser/pages.py keeps a copy of the reserved words"
    prefix = API_PREFIX.lstrip("/")
    words = set()
    for pattern in get_resolver().url_patterns:
        route = str(pattern.pattern)
        if route.startswith(prefix) and route != prefix:
            first = route.removeprefix(prefix).split("/")[0]
            if first and "<" not in first:
                words.add(first)
    # The WebSocket's route, and `any`, which the plugin route takes in the page's place.
    assert words | {routes.EVENTS, routes.ANY} == routes.RESERVED_PAGE_IDS


# --- the frameworks' private names, in the seams only ---------------------------------

FRAMEWORKS = ("django", "rest_framework", "adrf", "daphne", "twisted", "playwright", "channels", "asgiref")
# Where those names may be used: the seams, and the tests that pin what they rely on.
SEAM_PLACES = ("core/seams/", "tests/test_seams.py", "tests/test_seams_sockets.py")
# Underscored names Django documents as its models' public API (the `_meta`
# API; `Model._state` and `Model._default_manager` in the model and manager
# references): not private, whatever their spelling.
DOCUMENTED = frozenset({"_meta", "_state", "_default_manager"})
# Internals without an underscore: the DB-API connection under Django's wrapper.
UNDERSCORELESS = ("connection.connection",)
# A private name a framework defines: a function or class, or an attribute
# or variable it assigns (`self._x = `, `_x = `, `_x: T = `).
DEFINED = re.compile(
    r"^\s*(?:async\s+)?(?:def|class)\s+(_[A-Za-z]\w*)|\.(_[A-Za-z]\w*)\s*(?::[^=\n]*)?=(?!=)|^\s*(_[A-Za-z]\w*)\s*(?::[^=\n]*)?=(?!=)",
    re.MULTILINE,
)


@cache
def framework_private_names() -> frozenset[str]:
    """Every private name the installed frameworks define (their own tests left out)."""
    names: set[str] = set()
    for package in FRAMEWORKS:
        root = Path(importlib.util.find_spec(package).origin).parent
        for path in root.rglob("*.py"):
            if {"test", "tests"} & set(path.relative_to(root).parts[:-1]):
                continue
            for found in DEFINED.finditer(path.read_text(errors="replace")):
                names.add(next(name for name in found.groups() if name))
    return frozenset(names)


def is_private(name: str) -> bool:
    return name.startswith("_") and not name.endswith("__")


def from_framework(module: str) -> bool:
    return module.split(".")[0] in FRAMEWORKS


def private_uses(source: str, framework_names: frozenset[str]) -> list[tuple[int, str]]:
    """Where `source` uses a framework's private name: imports one, reads or
    sets one on an object (`response._resource_closers`, `getattr(x, "_y")`),
    overrides or reads one inherited from a framework's class (`self._x` in a
    subclass of one, where the class does not set `_x` itself), or reaches
    into an object's `__dict__` (a class's own, `cls.__dict__`, is Python's)
    or Django's connection (`connection.connection`).
    A private name of the project's own objects passes: the frameworks do not
    define it."""
    tree = ast.parse(source)
    source_of: dict[str, str] = {}  # a name this module imported: the module it came from
    uses: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                source_of[alias.asname or alias.name.split(".")[0]] = alias.name if alias.asname else alias.name.split(".")[0]
                if from_framework(alias.name) and any(map(is_private, alias.name.split("."))):
                    uses.append((node.lineno, f"import {alias.name}"))
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for alias in node.names:
                source_of[alias.asname or alias.name] = node.module
                if from_framework(node.module) and any(map(is_private, [*node.module.split("."), alias.name])):
                    uses.append((node.lineno, f"from {node.module} import {alias.name}"))
    inherited: set[int] = set()  # the `self._x` nodes judged with their class
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            uses += inherited_uses(node, source_of, framework_names, inherited)
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and id(node) not in inherited:
            receiver = ast.unparse(node.value)
            if f"{receiver}.{node.attr}".endswith(UNDERSCORELESS):
                uses.append((node.lineno, f"{receiver}.{node.attr}"))
            elif node.attr == "__dict__" and receiver != "cls":
                uses.append((node.lineno, f"{receiver}.__dict__"))
            elif is_private(node.attr) and node.attr in framework_names - DOCUMENTED and receiver not in ("self", "cls"):
                uses.append((node.lineno, f"{receiver}.{node.attr}"))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.args:
            name = node.args[1].value if len(node.args) > 1 and isinstance(node.args[1], ast.Constant) else None
            if node.func.id in ("getattr", "setattr", "hasattr", "delattr") and name in framework_names - DOCUMENTED:
                uses.append((node.lineno, f"{node.func.id}({ast.unparse(node.args[0])}, {name!r})"))
            elif node.func.id == "vars":
                uses.append((node.lineno, f"vars({ast.unparse(node.args[0])})"))
    return sorted(set(uses))


def inherited_uses(
    cls: ast.ClassDef, source_of: dict[str, str], framework_names: frozenset[str], judged: set[int]
) -> list[tuple[int, str]]:
    """In a class with a framework's class among its bases: the private names
    of the framework it overrides, and those it reads through `self` or
    `cls` without setting them itself."""
    bases = [ast.unparse(base) for base in cls.bases]
    if not any(from_framework(source_of.get(base.split(".")[0], "")) for base in bases):
        return []
    own: set[str] = set()
    for node in ast.walk(cls):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            own.add(node.name)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            own.add(node.attr)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            own.add(node.id)
    uses = []
    for node in cls.body:
        name = getattr(node, "name", None)
        if name and is_private(name) and name in framework_names:
            uses.append((node.lineno, f"{cls.name}.{name} overrides one of {', '.join(bases)}"))
    for node in ast.walk(cls):
        if isinstance(node, ast.Attribute) and ast.unparse(node.value) in ("self", "cls") and is_private(node.attr):
            judged.add(id(node))
            if node.attr in framework_names and node.attr not in own:
                uses.append((node.lineno, f"self.{node.attr}, from {', '.join(bases)}"))
    return uses


def test_no_private_name_of_a_framework_outside_the_seams():
    """Django, DRF, adrf, daphne, Twisted, Playwright, channels and asgiref
    change their private names without notice: each use lives in
    core/seams/, named and tested upstream (tests/test_seams.py)."""
    framework_names = framework_private_names()
    found = []
    for path in python_files():
        relative = path.relative_to(ROOT).as_posix()
        if relative.startswith(SEAM_PLACES):
            continue
        for line, what in private_uses(path.read_text(), framework_names):
            found.append(f"  {relative}:{line}: {what}")
    assert not found, (
        "a framework's private name outside core/seams/ (move it there as a named function, "
        "with a test in tests/test_seams.py of what it relies on):\n" + "\n".join(found)
    )


def test_the_private_name_finder_tells_a_framework_s_names_from_ours():
    """The finder on a module of its own: every way in that the seams take,
    found; the project's own private names and Django's documented ones, not."""
    source = """
from twisted.web import http
from twisted.web.http import _GenericHTTPChannelProtocol
from rest_framework.request import Request

class Channel(http.HTTPChannel):
    def lineReceived(self, line):
        return self._receivedHeaderSize

class Body(Request):
    def _load_stream(self):
        self._mine = 1
        return self._mine

class Ours:
    def _claim(self):
        return self._request

def close(response, reactor, request, obj, saved, page, model):
    response._resource_closers.append(print)
    obj.__dict__.update(saved.__dict__)
    page._claim()
    model._meta.get_field("id")
    obj._state.adding
    connection.connection.executescript("VACUUM;")
    return reactor._asyncioEventloop, getattr(request, "_request"), request._request, cls.__dict__
"""
    names = framework_private_names()
    assert {"_resource_closers", "_asyncioEventloop", "_request", "_receivedHeaderSize", "_load_stream"} <= names
    assert [what for _line, what in private_uses(source, names)] == [
        "from twisted.web.http import _GenericHTTPChannelProtocol",
        "self._receivedHeaderSize, from http.HTTPChannel",
        "Body._load_stream overrides one of Request",
        "response._resource_closers",
        "obj.__dict__",
        "saved.__dict__",
        "connection.connection",
        "getattr(request, '_request')",
        "reactor._asyncioEventloop",
        "request._request",
    ]
