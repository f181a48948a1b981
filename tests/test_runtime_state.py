"""One runtime owner: what the worker holds in memory while it runs is its
runtime's (worker/runtime.py), built by `serve` and handed to what needs it,
not a module's. This counts what a module still holds that looks like
state, from the source, and keeps it at the few that have their reason:
constants, Prometheus collectors, the plugin families, caches that hold no
runtime state, and what a management command needs before any runtime."""

from __future__ import annotations

import ast
from pathlib import Path

from harness.worker import ROOT
from tests.test_layout import FLOORS, python_files

# Calls that make a container or a lock: state, when a module holds one.
STATEFUL_CALLS = {
    "set", "dict", "list", "deque", "OrderedDict", "defaultdict", "Counter", "WeakSet", "WeakValueDictionary",
    "WeakKeyDictionary", "Lock", "RLock", "Event", "Semaphore", "Queue", "Condition",
}

# What stays at module level, and why. Each entry is "module:name". Not
# listed, and not counted: UPPER_CASE constants and prometheus_client's
# collectors and registries.
ALLOWED = {
    "core/db_thread.py:executor": "the one database thread; `serve` and the commands use it before any runtime exists",
    "core/db_thread.py:admin_request": "a context variable: each request's own value, nothing shared",
    "core/api.py:_renderer": "a JSON renderer, which holds nothing between calls",
    "core/metrics.py:_request_series": "a cache of the Prometheus collectors' labelled series",
    "core/rest.py:_shapes": "a cache of serializers built from classes, the same for every worker",
    "plugins/demo.py:family": "the plugin families: a family and its actions",
    "plugins/primitives.py:primitives": "the plugin families: the primitives",
    "plugins/web/base.py:family": "the plugin families: a family and its actions",
    "schedules/services.py:schedules_changed": "a Django signal: a dispatcher, as Django declares them",
    "core/parent_death.py:_libc": "the C library, loaded once",
}


def looks_like_state(value: ast.expr, collectors: set[str]) -> bool:
    if isinstance(value, (ast.Dict, ast.List, ast.Set)) and not getattr(value, "keys", getattr(value, "elts", None)):
        return True  # an empty display: filled while the process runs
    if isinstance(value, ast.Call):
        name = ast.unparse(value.func).rsplit(".", 1)[-1]
        if name in collectors:
            return False  # a Prometheus collector
        return name in STATEFUL_CALLS or name[:1].isupper()  # a container, a lock, or an instance of a class
    return False


def module_state(path: Path) -> set[str]:
    """The names `path` binds at module level to something that looks like
    state, and those it rebinds with `global`. An UPPER_CASE name is a
    constant (PEP 8)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    collectors = {
        alias.asname or alias.name for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("prometheus_client") for alias in node.names
    }
    found = set()
    for node in tree.body:
        if isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None and looks_like_state(node.value, collectors):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            found |= {
                target.id for target in targets
                if isinstance(target, ast.Name) and target.id != "__all__" and not target.id.isupper()
            }
    for node in ast.walk(tree):
        if isinstance(node, ast.Global):
            found |= set(node.names)
    return found


def held_by_modules() -> set[str]:
    held = set()
    for path in python_files():
        relative = path.relative_to(ROOT)
        if relative.parts[0] not in FLOORS or "migrations" in relative.parts or relative.parts[0] == "penelope_site":
            continue  # the apps' code; settings and URLs are configuration
        held |= {f"{relative.as_posix()}:{name}" for name in module_state(path)}
    return held


def test_the_worker_s_state_is_its_runtime_s():
    held = held_by_modules()
    unexplained = sorted(held - set(ALLOWED))
    assert not unexplained, (
        "module-level state (make it an attribute of the runtime, worker/runtime.py, and hand it to what "
        "needs it; or say in ALLOWED why it stays):\n" + "\n".join(unexplained)
    )
    gone = sorted(set(ALLOWED) - held)
    assert not gone, f"ALLOWED names what no module holds any more; take it out: {gone}"


def test_the_finder_sees_a_module_s_state(tmp_path):
    module = tmp_path / "m.py"
    module.write_text(
        "import asyncio, collections\nfrom prometheus_client import Counter\n"
        "LIMIT = 5\nWORDS = {'a': 1}\nNAMES = ['x']\n"  # constants
        "pending = {}\nseen: set[str] = set()\nlock = asyncio.Lock()\nbuffer = collections.deque(maxlen=3)\n"
        "registry = PageRegistry()\nrequests = Counter('requests', 'Requests.')\nSHARED = object()\n"
        "def bump():\n    global count\n    count = 1\n"
    )
    assert module_state(module) == {"pending", "seen", "lock", "buffer", "registry", "count"}


def test_no_module_rebinds_a_global():
    """No app's module rebinds a name with `global`: a value made once is a
    cache (`functools.cache`) or the runtime's, never a name reassigned."""
    rebound = []
    for path in python_files():
        relative = path.relative_to(ROOT)
        if relative.parts[0] not in FLOORS or "migrations" in relative.parts:
            continue
        tree = ast.parse(path.read_text(), filename=str(path))
        rebound += [
            f"{relative.as_posix()}:{node.lineno}: global {', '.join(node.names)}"
            for node in ast.walk(tree)
            if isinstance(node, ast.Global)
        ]
    assert not rebound, "`global` statements (use functools.cache, or the runtime):\n" + "\n".join(rebound)
