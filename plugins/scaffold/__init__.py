"""A new plugin family, written from the templates beside this module
(`family/`, files ending in `-tpl`, with `{{ name }}` and `{{ penelope_home }}`
in them): the family's package, a fixture page and tests that pass as
written. `manage.py startfamily` calls `write_family`.

Nothing is ever overwritten: a name or folder that is refused writes nothing.
"""

from __future__ import annotations

import importlib.util
import json
import keyword
import re
import shutil
import sys
from pathlib import Path

from plugins.framework import PluginsInvalid, families

TEMPLATES = Path(__file__).resolve().parent / "family"
NAME_PATTERN = re.compile(r"[a-z][a-z0-9_]{0,31}")
PLACEHOLDER = re.compile(r"\{\{ (\w+) \}\}")


class ScaffoldNotMade(Exception):
    """The name or the folder cannot take a new family; the message says why."""


def check_name(name: str) -> None:
    """A name a family and its module can take: refused when it is not
    `[a-z][a-z0-9_]{0,31}`, is a keyword, is importable already (a worker
    would import the other module, or the family would hide it), or names
    a family the worker loads."""
    if not NAME_PATTERN.fullmatch(name):
        raise ScaffoldNotMade(
            f"A family's name is 1 to 32 of a-z, 0-9 and _, starting with a letter (e.g. shop); {name!r} is not."
        )
    if keyword.iskeyword(name):
        raise ScaffoldNotMade(f"{name} is a Python keyword, so no module can have it: choose another name.")
    if name in sys.stdlib_module_names or importlib.util.find_spec(name) is not None:
        raise ScaffoldNotMade(f"A module named {name} can be imported already: choose a name no module has.")
    try:
        loaded = families()
    except PluginsInvalid as error:
        raise ScaffoldNotMade(f"The families this worker loads cannot be read, to check the name: {error}") from None
    if name in loaded:
        raise ScaffoldNotMade(
            f"The worker loads a family named {name} already (PENELOPE_PLUGINS): choose another name."
        )


def check_folder(folder: Path, name: str) -> Path:
    """Where the family goes, `folder/name`: `folder` must exist, and
    nothing named `name` in it may."""
    if not folder.is_dir():
        raise ScaffoldNotMade(f"{folder} is not a folder: make it first, or name another with --dir.")
    for taken in (folder / name, folder / f"{name}.py"):
        if taken.exists() or taken.is_symlink():
            raise ScaffoldNotMade(f"{taken} exists already; startfamily never overwrites anything.")
    return folder / name


def render(template: str, values: dict[str, str]) -> str:
    def value(match: re.Match[str]) -> str:
        return values[match[1]]

    return PLACEHOLDER.sub(value, template)


def planned(name: str) -> list[tuple[Path, str]]:
    """Each template and where it goes under the family's folder."""
    plan = []
    for template in sorted(TEMPLATES.rglob("*-tpl")):
        relative = template.relative_to(TEMPLATES).with_name(template.name.removesuffix("-tpl"))
        if relative == Path("tests", "test_family.py"):
            relative = relative.with_name(f"test_{name}.py")
        plan.append((relative, template.read_text()))
    return plan


def write_family(*, name: str, folder: Path, penelope_home: Path) -> list[Path]:
    """Write the family `name` into `folder/name` and answer the files written.
    Its tests find Penelope at `penelope_home` (or PENELOPE_HOME)."""
    check_name(name)
    target = check_folder(folder, name)
    # Placed inside a Python string of the conftest, escaped as one.
    values = {"name": name, "penelope_home": json.dumps(str(penelope_home))[1:-1]}
    files = [(target / relative, render(text, values)) for relative, text in planned(name)]
    target.mkdir()  # fails if something took the name meanwhile: nothing is overwritten
    try:
        for path, text in files:
            path.parent.mkdir(parents=True, exist_ok=True)
            with open(path, "x") as file:
                file.write(text)
    except BaseException:
        shutil.rmtree(target, ignore_errors=True)  # the folder is this call's own
        raise
    return [path for path, _ in files]
