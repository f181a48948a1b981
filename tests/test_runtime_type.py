"""`runtime_of` answers a `WorkerRuntime` (core/runtime.py): the parts of
the worker's runtime the apps use, typed where core may name their class.
The runtime itself (worker/runtime.py) sits on the top floor and core on the
bottom, so nothing but these tests ties the two: a part renamed on either
side, or one an app starts to use that the protocol does not name, fails
here rather than in a request."""

from __future__ import annotations

import ast
import typing
from typing import Any

from core.runtime import WorkerRuntime
from harness.worker import ROOT
from tests.test_layout import FLOORS, python_files
from worker.runtime import Runtime

PARTS = typing.get_type_hints(WorkerRuntime)


def test_a_real_runtime_has_every_part_the_protocol_names():
    runtime = Runtime()
    missing = sorted(name for name in PARTS if not hasattr(runtime, name))
    assert not missing, f"the protocol names parts worker.runtime.Runtime does not have: {missing}"
    assert isinstance(runtime, WorkerRuntime)
    for name, kind in PARTS.items():
        if kind is not Any:  # a part core can name the class of: the runtime's is one
            assert isinstance(getattr(runtime, name), typing.get_origin(kind) or kind), (name, kind)


def parts_used(tree: ast.AST) -> set[str]:
    """The parts a module reads off a runtime: `runtime_of(x).part`,
    `runtime.part` and `self.runtime.part`."""
    used = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute):
            continue
        holder = node.value
        if (
            isinstance(holder, ast.Call) and isinstance(holder.func, ast.Name) and holder.func.id == "runtime_of"
        ) or ast.unparse(holder) in {"runtime", "self.runtime"}:
            used.add(node.attr)
    return used


def test_the_apps_use_only_parts_the_protocol_names():
    """worker/ holds the Runtime itself (its loops, its steps), which the
    apps below it never see."""
    unnamed = []
    for path in python_files():
        relative = path.relative_to(ROOT)
        if relative.parts[0] not in FLOORS or relative.parts[0] == "worker" or "migrations" in relative.parts:
            continue
        tree = ast.parse(path.read_text(), filename=str(path))
        unnamed += [f"{relative.as_posix()}: runtime.{part}" for part in sorted(parts_used(tree) - set(PARTS))]
    assert not unnamed, "parts of the runtime the apps use that WorkerRuntime does not name:\n" + "\n".join(unnamed)


def test_the_finder_sees_each_way_to_a_part():
    tree = ast.parse(
        "def f(request, runtime):\n    runtime_of(request).pages.get('main')\n    runtime.tracker.touch()\n"
        "class C:\n    def g(self):\n        self.runtime.bus\n        self.other.jobs\n"
    )
    assert parts_used(tree) == {"pages", "tracker", "bus"}
