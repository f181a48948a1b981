"""The house rules a reader relies on, checked in-process from the source:
no module of the project over 400 lines, no import circle between its
modules (imports under `if TYPE_CHECKING:` and inside functions count too),
and one list of the words the API's paths take from page ids."""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from functools import cache
from pathlib import Path

from harness.worker import ROOT

MAX_LINES = 400
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
        if lines > MAX_LINES:
            too_long.append(f"{relative}: {lines} lines")
    assert not too_long, f"modules over {MAX_LINES} lines (split them by what they do):\n" + "\n".join(too_long)


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
